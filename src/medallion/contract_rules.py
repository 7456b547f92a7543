"""A dataset's contract as named rules (medallion/expectations.py says what each does), and the
Columns that judge a record by them: why it is quarantined, and every rule it broke."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property, reduce

from pyspark.sql import Column
from pyspark.sql import functions as F

from medallion.contracts import (
    Check,
    FieldRule,
    Stages,
    field_checks,
    field_clean,
    validation_stages,
)
from medallion.expectations import FAILED_RULES, Expectations
from medallion.json_columns import JSON_WHITESPACE, REPLACEMENT_CHARACTER, json_kind, strip_bom
from medallion.sql_names import validate_identifier


def _structural(raw: Column, doc: Column) -> list[tuple[str, Column, Column]]:
    """Why a line is not one JSON object at all, first match wins: (rule, condition, reason)."""
    keys = F.json_object_keys(strip_bom(raw))
    not_json = doc.isNull()
    return [
        # The file source decodes bytes that are not UTF-8 to U+FFFD: the content is altered.
        (
            "valid_utf8",
            raw.contains(REPLACEMENT_CHARACTER),
            F.lit("invalid UTF-8: bytes replaced by U+FFFD"),
        ),
        (
            "unique_keys",
            not_json & keys.isNotNull() & (F.size(keys) != F.size(F.array_distinct(keys))),
            F.lit("malformed JSON: duplicate key in object"),
        ),
        ("parseable_json", not_json, F.lit("malformed JSON: not parseable")),
        (
            # The line is JSON here, so after its byte-order mark it holds no other one.
            "json_object",
            ~F.ltrim(raw, F.lit(JSON_WHITESPACE + "\ufeff")).startswith("{"),
            F.concat(F.lit("not a JSON object: got "), json_kind(doc)),
        ),
    ]


STRUCTURAL_RULES = ("valid_utf8", "unique_keys", "parseable_json", "json_object")


def _any(conditions: Iterable[Column]) -> Column:
    return reduce(lambda a, b: a | b, conditions, F.lit(False))


# The hidden columns of a verdict's rules: the structural rule a line broke (NULL for a JSON
# object), whether its fields are plainly valid, and whether it broke each rule of the content.
_STRUCTURAL_RULE = "__structural_rule"
_FIELDS_CLEAN = "__fields_clean"


def _broke_column(rule: str) -> str:
    return f"__broke_{rule}"


def _broke(rule: str) -> Column:
    """True when the record broke the content rule (false when not judged)."""
    return F.coalesce(F.col(_broke_column(rule)), F.lit(False))


@dataclass(frozen=True)
class Contract:
    """What a record of ``dataset`` must be: its fields (medallion/contracts.py makes their
    rules) and the dataset's own ``checks``."""

    dataset: str
    fields: tuple[FieldRule, ...]
    checks: tuple[Check, ...] = ()

    def __post_init__(self) -> None:
        validate_identifier(self.dataset, "dataset")
        names = self.rule_names
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"contract {self.dataset}: rules named twice: {', '.join(twice)}")

    @cached_property
    def content_checks(self) -> tuple[Check, ...]:
        """The rules of a line that is one JSON object: its fields', then its own."""
        return (*(c for f in self.fields for c in field_checks(f)), *self.checks)

    @cached_property
    def rule_names(self) -> tuple[str, ...]:
        return (*STRUCTURAL_RULES, *(c.name for c in self.content_checks))

    @cached_property
    def warnable(self) -> frozenset[str]:
        return frozenset(c.name for c in self.content_checks if c.can_warn)

    def validation_stages(self, expectations: Expectations, outputs: Sequence[Column]) -> Stages:
        """The projections that validate bronze rows (``_raw`` and the rest): the line parsed
        and each field's values (:func:`~medallion.contracts.validation_stages`), each rule
        judged once, then ``reason`` (why the record is quarantined, or NULL: every broken rule
        whose action is not ``warn``, joined by ``"; "``), :data:`FAILED_RULES` (every rule it
        broke) and ``outputs``, which read the fields' columns.

        A line that is not one JSON object breaks one structural rule and no other. Each rule's
        condition has a column of its own, which the reason and the rules broken both read:
        written into both, Spark evaluates a condition inside a CASE once for each (a verdict
        then cost twice as much).
        """
        raw, doc = F.col("_raw"), F.col("_doc")
        structural = _structural(raw, doc)
        first_broken = reduce(
            lambda chain, rule: chain.when(rule[1], F.lit(rule[0])),
            structural[1:],
            F.when(structural[0][1], F.lit(structural[0][0])),
        )
        built = [(c.name, *c.build()) for c in self.content_checks]
        structural_rule = F.col(_STRUCTURAL_RULE)
        fields_clean = reduce(lambda a, b: a & b, map(field_clean, self.fields), F.lit(True))
        # A rule of the content is judged only for a JSON object (NULL otherwise); a field's
        # rules only when its values are not plainly valid (field_clean).
        field_rules = {c.name for f in self.fields for c in field_checks(f)}
        object_to_judge = structural_rule.isNull()
        fields_to_judge = object_to_judge & ~F.col(_FIELDS_CLEAN)
        judged = [
            F.when(fields_to_judge if name in field_rules else object_to_judge, condition).alias(
                _broke_column(name)
            )
            for name, condition, _ in built
        ]
        own_rules = [name for name, _, _ in built if name not in field_rules]
        clean = object_to_judge & F.col(_FIELDS_CLEAN) & ~_any(map(_broke, own_rules))
        verdict = self._verdict(structural, built, expectations, clean)
        return validation_stages(
            self.fields,
            [*verdict, *outputs],
            rules=(
                [first_broken.alias(_STRUCTURAL_RULE), fields_clean.alias(_FIELDS_CLEAN)],
                judged,
            ),
        )

    @staticmethod
    def _verdict(
        structural: list[tuple[str, Column, Column]],
        built: list[tuple[str, Column, Column | str]],
        expectations: Expectations,
        clean: Column,
    ) -> list[Column]:
        """``reason`` and :data:`FAILED_RULES`, read from the rules' columns; a ``clean``
        record broke none, so it skips them."""
        structural_rule = F.col(_STRUCTURAL_RULE)
        structural_reason = reduce(
            lambda chain, rule: chain.when(structural_rule == rule[0], rule[2]),
            structural[1:],
            F.when(structural_rule == structural[0][0], structural[0][2]),
        )
        rules = [(n, _broke(n), m if isinstance(m, Column) else F.lit(m)) for n, _, m in built]
        stopping = [r for r in rules if r[0] not in expectations.warned]
        content_reason = F.when(
            _any(c for _, c, _ in stopping),
            F.array_join(F.array_compact(F.array(*[F.when(c, m) for _, c, m in stopping])), "; "),
        )
        reason = F.coalesce(structural_reason, F.nullif(content_reason, F.lit("")))
        broken = F.array_compact(F.array(*[F.when(c, F.lit(n)) for n, c, _ in rules]))
        none: Column = F.array().cast("array<string>")
        failed_rules = (
            F.when(structural_rule.isNotNull(), F.array(structural_rule))
            .when(_any(c for _, c, _ in rules), broken)
            .otherwise(none)
        )
        return [
            F.when(~clean, reason).alias("reason"),
            F.when(clean, none).otherwise(failed_rules).alias(FAILED_RULES),
        ]
