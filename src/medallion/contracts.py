"""Input contracts: fields, types, validity rules and quarantine reasons, in one place.

A JSON line is parsed with Spark's ``try_parse_json`` into a VARIANT, which keeps the JSON
type of every value. That lets the rules tell ``"revenue": 12.5`` from ``"revenue": "12.5"``,
a missing field from an explicit ``null``, and an object from an array or a scalar.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from medallion.column_stages import apply_stages
from medallion.json_columns import (
    ANY_OFFSET_PATTERN,
    BLANK_CHARACTERS,
    MONEY_TYPE,
    NO_ZONE_PATTERN,
    TIMESTAMP_PATTERN,
    TIMESTAMP_RANGE,
    as_string,
    is_blank,
    json_field,
    kind_of_schema,
    money_value,
    number_as_written,
    parse_event_timestamp,
    parse_json_line_stages,
)
from medallion.sql_names import validate_identifier


@dataclass(frozen=True)
class FieldRule:
    """One input field: its name, kind, whether it must be present, and its allowed values.

    Kinds: ``string``, ``money`` (a JSON number >= 0 that fits DECIMAL(18,4)), ``decimal``
    (any JSON number that fits DECIMAL(18,4), negative too), ``number`` (any finite JSON
    number, as a DOUBLE: a score, not an amount), ``integer`` (a JSON integer that fits BIGINT)
    and ``timestamp`` (an ISO-8601 string with a zone).
    """

    name: str
    kind: str
    required: bool
    allowed: tuple[str, ...] = ()
    # The engine acts on its value (a change's operation): a record that breaks one of its
    # rules never passes into silver, whatever the expectations say.
    strict: bool = False


OPERATIONS = ("INSERT", "UPDATE", "DELETE")

_JSON_KIND_OF = {
    "string": "string",
    "timestamp": "string",
    "money": "number",
    "decimal": "number",
    "number": "number",
    "integer": "number",
}
_EXACT_NUMBER_KINDS = ("money", "decimal")


# Per-field values are extracted from the VARIANT once, into these hidden columns, and the
# rules read the columns: written inline, every rule would extract the field again (a rule
# set references each field ~15 times, which made validation three times slower).
def _hidden(part: str, name: str) -> str:
    """The name of one hidden per-field column, for example ``__schema_revenue``."""
    return f"__{part}_{name}"


def field_text(name: str) -> Column:
    """A field's value as text (see :func:`as_string`), after :func:`field_value_stages`."""
    return F.col(_hidden("text", name))


def field_value(name: str) -> Column:
    """A field's typed value after :func:`field_value_stages`: TIMESTAMP for a timestamp field
    (NULL unless ISO-8601 with a zone), DECIMAL(18,4) for money (NULL unless the number is
    exactly that: see :func:`money_value`), BIGINT for an integer, DOUBLE for a number (NULL
    unless finite), text otherwise."""
    return F.col(_hidden("typed", name))


# The ``schema_of_variant`` texts of each JSON kind a rule can expect.
_SCHEMAS_OF_KIND = {
    "string": ("STRING",),
    "number": ("BIGINT", "INT", "SMALLINT", "TINYINT", "DOUBLE", "FLOAT"),
}


def _has_kind(schema: Column, kind: str) -> Column:
    """True when a ``schema_of_variant`` text is of this JSON kind (string or number)."""
    matches = schema.isin(*_SCHEMAS_OF_KIND[kind])
    return matches | schema.startswith("DECIMAL") if kind == "number" else matches


def field_value_stages(
    doc: Column, fields: tuple[FieldRule, ...], raw: Column | None = None
) -> tuple[list[Column], ...]:
    """Each field's JSON schema, text and typed value, extracted from ``doc`` once, as the
    projections that add them in turn (each reads the columns of the one before).

    A contract's rules (:meth:`~medallion.contract_rules.Contract.validation_stages`),
    :func:`field_text` and :func:`field_value` read these columns, whose names start with
    ``__``; select the columns you need afterwards (:func:`validation_stages` does). ``raw``
    is the line (default: the ``_raw`` column), read again only for a money value that the
    VARIANT holds as a double (see :func:`number_as_written`).
    """
    raw = F.col("_raw") if raw is None else raw
    values = [json_field(doc, rule.name).alias(_hidden("value", rule.name)) for rule in fields]
    columns: list[Column] = []
    for rule in fields:
        value = F.col(_hidden("value", rule.name))
        text = as_string(value)
        schema = F.schema_of_variant(value)
        columns += [
            schema.alias(_hidden("schema", rule.name)),
            text.alias(_hidden("text", rule.name)),
        ]
        if rule.kind == "timestamp":
            columns.append(parse_event_timestamp(text).alias(_hidden("typed", rule.name)))
        elif rule.kind in _EXACT_NUMBER_KINDS:
            # The number's exact text: the VARIANT's for a decimal or an integer, the line's
            # own for a double (an exponent or over 38 digits: the VARIANT rounded it).
            written = F.when(schema == "DOUBLE", number_as_written(raw, rule.name)).when(
                _has_kind(schema, "number"), text
            )
            columns += [
                written.alias(_hidden("number", rule.name)),
                F.try_variant_get(value, "$", "double").alias(_hidden("double", rule.name)),
            ]
        elif rule.kind == "integer":
            columns.append(integer_value(value).alias(_hidden("typed", rule.name)))
        elif rule.kind == "number":
            number = F.try_variant_get(value, "$", "double")
            finite = ~F.isnan(number) & (F.abs(number) != float("inf"))
            columns.append(F.when(finite, number).alias(_hidden("typed", rule.name)))
        else:
            columns.append(text.alias(_hidden("typed", rule.name)))
    derived = [
        money_value(F.col(_hidden("number", rule.name))).alias(_hidden("typed", rule.name))
        for rule in fields
        if rule.kind in _EXACT_NUMBER_KINDS
    ]
    return tuple(stage for stage in (values, columns, derived) if stage)


# The projections that validate a batch, in turn: see :func:`validation_stages`.
Stages = tuple[list[Column], ...]


def validation_stages(
    fields: tuple[FieldRule, ...],
    outputs: Sequence[Column],
    rules: Sequence[Sequence[Column]] = (),
) -> Stages:
    """The projections that validate bronze rows (``_raw`` and the rest): the line parsed into
    ``_doc``, each field's values (:func:`field_value_stages`), the ``rules``' stages, then
    ``outputs``, which read them. A contract's own
    :meth:`~medallion.contract_rules.Contract.validation_stages` adds its rules and verdict.
    :func:`apply_validation` applies them."""
    doc = F.col("_doc")
    parsed = parse_json_line_stages(F.col("_raw"))
    stages = (*field_value_stages(doc, fields, F.col("_raw")), *(list(r) for r in rules))
    return (*parsed, *stages, list(outputs))


def apply_validation(df: DataFrame, stages: Stages) -> DataFrame:
    """``df`` through :func:`validation_stages`: every stage added in turn, then the outputs."""
    return apply_stages(df, stages[:-1]).select(*stages[-1])


def field_missing(name: str) -> Column:
    """True when the field is absent or JSON null."""
    return F.col(_hidden("value", name)).isNull() | (F.col(_hidden("schema", name)) == "VOID")


@dataclass(frozen=True)
class Check:
    """One named rule: ``build()`` gives the Column that says a record breaks it and the
    message that says why (built in a session, where Columns are made). ``can_warn``: a record
    that breaks it still has a usable value, so it may pass into silver with a warning."""

    name: str
    build: Callable[[], tuple[Column, Column | str]]
    can_warn: bool = True

    def __post_init__(self) -> None:
        validate_identifier(self.name, "rule name")


def _quoted(text: Column) -> Column:
    return F.substring(text, 1, 64)


def field_checks(rule: FieldRule) -> list[Check]:
    """The rules of one field, named ``<field>_<check>``, read from the columns of
    :func:`field_value_stages`. A required field's rules cannot warn (its value would be
    missing in silver), except those that keep a typed value; a ``strict`` field's never."""
    name, kind = rule.name, rule.kind
    expected = _JSON_KIND_OF[kind]
    schema, as_double = (functools.partial(F.col, _hidden(p, name)) for p in ("schema", "double"))
    missing, text = functools.partial(field_missing, name), functools.partial(field_text, name)

    def well_typed() -> Column:
        return ~missing() & _has_kind(schema(), expected)

    def unparsed() -> Column:
        # Of the right JSON kind but without a typed value: a timestamp that did not parse, a
        # fraction for an integer, a number that is not finite. Every timestamp pattern runs
        # only for such a timestamp: a parsed one matched TIMESTAMP_PATTERN, which has a zone
        # in range (AND stops at the first false).
        return well_typed() & field_value(name).isNull()

    def no_zone() -> Column:
        return text().rlike(NO_ZONE_PATTERN)

    def bad_offset() -> Column:
        return text().rlike(ANY_OFFSET_PATTERN) & ~text().rlike(TIMESTAMP_PATTERN)

    def not_finite() -> Column:
        value = as_double()
        return value.isNull() | F.isnan(value) | (F.abs(value) == float("inf"))

    def negative() -> Column:
        return as_double() < 0 if kind == "money" else F.lit(False)

    optional = not rule.required and not rule.strict
    keeps_value = not rule.strict
    noun = "an integer" if kind == "integer" else f"a {expected}"
    checks = []
    if rule.required:
        checks.append(
            Check(f"{name}_present", lambda: (missing(), f"missing field: {name}"), False)
        )
    checks.append(
        Check(
            f"{name}_type",
            lambda: (
                ~missing() & ~_has_kind(schema(), expected),
                F.concat(F.lit(f"{name} must be {noun}, got "), kind_of_schema(schema())),
            ),
            optional,
        )
    )
    if kind == "string" and rule.required:
        checks.append(
            Check(
                f"{name}_not_empty",
                lambda: (well_typed() & is_blank(text()), f"{name} is empty"),
                False,
            )
        )
    if rule.allowed:
        checks.append(
            Check(
                f"{name}_allowed",
                lambda: (
                    well_typed() & ~text().isin(*rule.allowed) & ~is_blank(text()),
                    F.concat(F.lit(f"unknown {name}: "), _quoted(text())),
                ),
                keeps_value,
            )
        )
    if kind == "timestamp":
        low, high = TIMESTAMP_RANGE
        checks += [
            Check(
                f"{name}_has_zone",
                lambda: (unparsed() & no_zone(), f"{name} has no time zone"),
                optional,
            ),
            Check(
                f"{name}_zone_offset",
                lambda: (
                    unparsed() & bad_offset(),
                    F.concat(
                        F.lit(f"{name} has a zone offset outside -18:00..+18:00: "), _quoted(text())
                    ),
                ),
                optional,
            ),
            Check(
                f"{name}_iso8601",
                lambda: (
                    unparsed() & ~no_zone() & ~bad_offset(),
                    F.concat(
                        F.lit(f"{name} is not an ISO-8601 timestamp with a zone: "), _quoted(text())
                    ),
                ),
                optional,
            ),
            Check(
                f"{name}_in_range",
                lambda: (
                    well_typed()
                    & (
                        (field_value(name) < F.lit(low).cast("timestamp"))
                        | (field_value(name) >= F.lit(high).cast("timestamp"))
                    ),
                    F.concat(F.lit(f"{name} is out of range [{low}, {high}): "), _quoted(text())),
                ),
                keeps_value,
            ),
        ]
    if kind == "integer":
        checks.append(
            Check(
                f"{name}_integer",
                lambda: (
                    unparsed(),
                    F.concat(F.lit(f"{name} must be an integer, got "), _quoted(text())),
                ),
                optional,
            )
        )
    if kind == "number" or kind in _EXACT_NUMBER_KINDS:
        # A number's typed value is NULL unless finite; an exact one is checked as a double.
        exact = kind in _EXACT_NUMBER_KINDS
        checks.append(
            Check(
                f"{name}_finite",
                lambda: (
                    well_typed() & not_finite() if exact else unparsed(),
                    f"{name} is not a finite number",
                ),
                optional,
            )
        )
    if kind in _EXACT_NUMBER_KINDS:
        if kind == "money":
            checks.append(
                Check(
                    f"{name}_not_negative",
                    lambda: (well_typed() & ~not_finite() & negative(), f"{name} is negative"),
                    keeps_value,
                )
            )
        checks.append(
            Check(
                f"{name}_fits",
                lambda: (
                    well_typed() & ~not_finite() & ~negative() & field_value(name).isNull(),
                    f"{name} does not fit {MONEY_TYPE} (at most 14 integer and 4 decimal digits)",
                ),
                optional,
            )
        )
    return checks


def field_clean(rule: FieldRule) -> Column:
    """True only when the field breaks none of :func:`field_checks`' rules, told from its
    typed value alone (never NULL). Most records are valid, so a contract judges a field's
    rules only where this is false; false does not mean broken (a text that starts with
    whitespace, say): the rules decide then."""
    name, kind = rule.name, rule.kind
    schema, typed = F.col(_hidden("schema", name)), field_value(name)
    has_value = _has_kind(schema, _JSON_KIND_OF[kind]) & typed.isNotNull()
    if kind == "string" and rule.required:
        has_value &= (typed != "") & ~F.substring(typed, 1, 1).isin(*BLANK_CHARACTERS)
    elif kind == "timestamp":
        low, high = TIMESTAMP_RANGE
        has_value &= (typed >= F.lit(low).cast("timestamp")) & (
            typed < F.lit(high).cast("timestamp")
        )
    elif kind in _EXACT_NUMBER_KINDS:
        as_double = F.col(_hidden("double", name))
        has_value &= ~F.isnan(as_double) & (F.abs(as_double) != float("inf"))
        if kind == "money":
            has_value &= as_double >= 0
    if rule.allowed:
        has_value &= field_text(name).isin(*rule.allowed)
    clean = has_value if rule.required else field_missing(name) | has_value
    return F.coalesce(clean, F.lit(False))


def integer_value(value: Column) -> Column:
    """A JSON integer as BIGINT; NULL for fractions (``1.5``, ``1.0``), exponents and overflow."""
    return F.when(F.schema_of_variant(value) == "BIGINT", F.try_variant_get(value, "$", "bigint"))
