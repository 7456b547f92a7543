"""Expectations: every rule of an input contract, named, with what happens to a record that
breaks it (docs/governance.md, "Expectations").

- ``quarantine`` (the default): the record goes to the quarantine with the rule's message;
- ``warn``: the record passes into silver and the failure is counted in the data-quality log;
- ``fail``: the record is quarantined, but when more than the rule's threshold of a batch's
  rows break it (default 0: any row), the stream stops before the batch writes anything.

A contract (:class:`Contract`) is its fields' rules (medallion/contracts.py), the rules every
line is checked against first (is it UTF-8, JSON, one object), and the dataset's own. Rules are
named ``<field>_<check>`` (``event_type_allowed``, ``revenue_not_negative``) or by the
dataset (``purchase_has_revenue``). A rule whose failure would leave silver without a usable
value (a required field missing or mistyped, a change's operation) cannot be set to ``warn``.

Actions are pipeline settings: ``--set expect.events.revenue_not_negative=warn``, or
``fail:0.05`` to stop when more than 5% of a batch's rows break it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import reduce

from pyspark.sql import Column
from pyspark.sql import functions as F

from medallion.contracts import Check, FieldRule, field_checks
from medallion.errors import ConfigError
from medallion.json_columns import JSON_WHITESPACE, REPLACEMENT_CHARACTER, json_kind, strip_bom
from medallion.sql_names import validate_identifier

QUARANTINE, WARN, FAIL = "quarantine", "warn", "fail"
ACTIONS = (QUARANTINE, WARN, FAIL)
SETTING_PREFIX = "expect."
# The column of a validated batch that lists the rules each row broke (empty when none).
FAILED_RULES = "_failed_rules"


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


@dataclass(frozen=True)
class Expectations:
    """What each rule of one dataset's contract does to a record that breaks it: ``warned``
    rules let it pass, ``failing`` ones (rule, most failing rows allowed as a fraction of a
    batch) stop the stream beyond their threshold; every other rule quarantines."""

    dataset: str
    warned: frozenset[str] = frozenset()
    failing: tuple[tuple[str, Decimal], ...] = ()

    def action(self, rule: str) -> str:
        if rule in self.warned:
            return WARN
        return FAIL if rule in dict(self.failing) else QUARANTINE


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

    def content_checks(self) -> tuple[Check, ...]:
        """The rules of a line that is one JSON object: its fields', then its own."""
        return (*(c for f in self.fields for c in field_checks(f)), *self.checks)

    @property
    def rule_names(self) -> tuple[str, ...]:
        return (*STRUCTURAL_RULES, *(c.name for c in self.content_checks()))

    @property
    def warnable(self) -> frozenset[str]:
        return frozenset(c.name for c in self.content_checks() if c.can_warn)

    def verdict(self, raw: Column, doc: Column, expectations: Expectations) -> list[Column]:
        """``reason`` (why the record is quarantined, or NULL: every broken rule whose action
        is not ``warn``, joined by ``"; "``) and :data:`FAILED_RULES` (every rule it broke).

        ``doc`` is ``parse_json_line(raw)``, and the fields' columns come from
        ``field_value_stages``. A line that is not one JSON object breaks one structural rule
        and no other. A valid record costs the rules' conditions only.
        """
        structural = _structural(raw, doc)
        structural_reason = reduce(
            lambda chain, rule: chain.when(rule[1], rule[2]),
            structural[1:],
            F.when(structural[0][1], structural[0][2]),
        )
        structural_rule = reduce(
            lambda chain, rule: chain.when(rule[1], F.lit(rule[0])),
            structural[1:],
            F.when(structural[0][1], F.lit(structural[0][0])),
        )
        built = [(c.name, *c.build()) for c in self.content_checks()]
        rules = [
            (n, cond, msg if isinstance(msg, Column) else F.lit(msg)) for n, cond, msg in built
        ]
        stopping = [r for r in rules if r[0] not in expectations.warned]
        any_of = lambda items: reduce(lambda a, b: a | b, items, F.lit(False))  # noqa: E731
        content_reason = F.when(
            any_of(c for _, c, _ in stopping),
            F.array_join(F.array_compact(F.array(*[F.when(c, m) for _, c, m in stopping])), "; "),
        )
        reason = F.coalesce(structural_reason, F.nullif(content_reason, F.lit("")))
        broken = F.array_compact(F.array(*[F.when(c, F.lit(n)) for n, c, _ in rules]))
        none: Column = F.array().cast("array<string>")
        failed_rules = (
            F.when(structural_rule.isNotNull(), F.array(structural_rule))
            .when(any_of(c for _, c, _ in rules), broken)
            .otherwise(none)
        )
        return [reason.alias("reason"), failed_rules.alias(FAILED_RULES)]


def parse_action(text: str) -> tuple[str, Decimal]:
    """An action as a setting gives it: ``quarantine``, ``warn``, ``fail`` or ``fail:RATE``
    (the fraction of a batch's rows allowed to break the rule, 0 to 1).

    >>> parse_action("fail:0.05")
    ('fail', Decimal('0.05'))
    """
    action, _, rate = text.strip().partition(":")
    if action not in ACTIONS or (rate and action != FAIL):
        raise ConfigError(
            f"an expectation's action is quarantine, warn, fail or fail:RATE, not {text!r}"
        )
    try:
        threshold = Decimal(rate or "0")
    except InvalidOperation:
        threshold = Decimal(-1)
    if not threshold.is_finite() or not 0 <= threshold < 1:
        raise ConfigError(f"a fail threshold is a fraction from 0 to below 1, not {rate!r}")
    return action, threshold


def expectation_setting(name: str) -> tuple[str, str] | None:
    """``(dataset, rule)`` of a setting named ``expect.<dataset>.<rule>``; None for another."""
    if not name.startswith(SETTING_PREFIX):
        return None
    dataset, dot, rule = name[len(SETTING_PREFIX) :].partition(".")
    if not dot:
        raise ConfigError(f"an expectation setting is expect.<dataset>.<rule>, not {name!r}")
    return validate_identifier(dataset, "dataset"), validate_identifier(rule, "rule name")


def expectations_of(contract: Contract, settings: Mapping[str, str]) -> Expectations:
    """The actions ``settings`` give the rules of ``contract``; :class:`ConfigError` for an
    unknown rule, an unknown action, or ``warn`` on a rule that cannot pass with a warning."""
    warned: set[str] = set()
    failing: list[tuple[str, Decimal]] = []
    for name, value in settings.items():
        target = expectation_setting(name)
        if target is None or target[0] != contract.dataset:
            continue
        rule = target[1]
        if rule not in contract.rule_names:
            raise ConfigError(
                f"{contract.dataset} has no rule {rule!r}; its rules: "
                + ", ".join(contract.rule_names)
            )
        action, threshold = parse_action(value)
        if action == WARN and rule not in contract.warnable:
            raise ConfigError(
                f"rule {contract.dataset}.{rule} cannot be set to warn: a record that breaks it "
                "has no usable value for silver (use quarantine or fail)"
            )
        if action == WARN:
            warned.add(rule)
        elif action == FAIL:
            failing.append((rule, threshold))
    return Expectations(contract.dataset, frozenset(warned), tuple(sorted(failing)))
