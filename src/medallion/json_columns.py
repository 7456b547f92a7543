"""Column expressions over one raw JSON line: the line parsed once into a VARIANT (which keeps the
JSON kind of every value), a field's kind and text, a number exactly as written, money and
timestamps. The rules of the input contracts are made of these (medallion/contracts.py)."""

from __future__ import annotations

import re

from pyspark.sql import Column
from pyspark.sql import functions as F

# Patterns end in ``\z`` (the very end of the text), never ``$``: Java's ``$`` also matches
# before a final line terminator, so ``...Z$`` would accept ``"2026-11-20T10:00:00Z\n"``.

# ISO-8601 with seconds, an optional fraction of any precision and a mandatory zone: ``Z`` or an
# offset within -18:00..+18:00 (the range of Java's ZoneOffset), minutes 00-59.
TIMESTAMP_PATTERN = (
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-](0\d|1[0-7]):[0-5]\d|[+-]18:00)\z"
)

# The same shape with any two-digit offset: matched but not valid means the offset is out of range.
ANY_OFFSET_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?[+-]\d{2}:\d{2}\z"

# A date-time that would be valid but for its missing zone: ambiguous, so invalid.
NO_ZONE_PATTERN = r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?\z"

# Timestamps outside this range are implausible for this data (and beyond what many readers of
# the tables handle), so they are quarantined rather than given a window in year 9999.
TIMESTAMP_RANGE = ("1900-01-01", "2200-01-01")

REPLACEMENT_CHARACTER = "\ufffd"

# Money is exact: DECIMAL(18, 4). An amount with more decimals or a larger magnitude is
# quarantined rather than silently rounded.
MONEY_TYPE = "decimal(18,4)"
MONEY_SUM_TYPE = "decimal(28,4)"

# Java's \s, spelled out so that the plain-Python oracle in the tests can use the same class.
BLANK_PATTERN = r"^[ \t\n\x0B\f\r]*\z"
BLANK_CHARACTERS = (" ", "\t", "\n", "\x0b", "\f", "\r")

# JSON's whitespace (RFC 8259): what may come before and after the value of a line.
JSON_WHITESPACE = " \t\r\n"

# A JSON number as written (RFC 8259).
JSON_NUMBER_PATTERN = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"


def strip_bom(raw: Column) -> Column:
    """The line without a leading UTF-8 byte-order mark."""
    return F.when(raw.startswith("\ufeff"), F.substring(raw, 2, 2**31 - 1)).otherwise(raw)


# The line parsed inside ``[...]``, the hidden column :func:`parse_json_line_stages` adds.
_LINE_AS_ARRAY = "__line_as_array"


def parse_json_line_stages(raw: Column, alias: str = "_doc") -> list[list[Column]]:
    """The projections that add the line as a VARIANT, named ``alias``: NULL when the line is
    not exactly one valid JSON value. Two projections, so the line is parsed once.

    Spark's parser stops after the first complete value and ignores what follows, so
    ``{"a": 1}}`` would pass. Inside ``[line]`` the array can only close early at a ``]`` of
    the line: a line without one is one value when the array has one element. A line with a
    ``]`` (rare in records) must also parse inside ``{"v": line}``: trailing text cannot be
    valid both as the rest of an array and as the rest of an object member.
    """
    body = strip_bom(raw)
    as_array = F.col(_LINE_AS_ARRAY)
    as_member = F.try_parse_json(F.concat(F.lit('{"v":'), body, F.lit("}")))
    one_value = F.when(
        F.try_variant_get(as_array, "$[1]", "variant").isNull(),
        F.try_variant_get(as_array, "$[0]", "variant"),
    )
    doc = F.when(~raw.contains("]"), one_value).when(
        as_array.isNotNull(), F.try_variant_get(as_member, "$.v", "variant")
    )
    parsed = F.try_parse_json(F.concat(F.lit("["), body, F.lit("]")))
    return [[parsed.alias(_LINE_AS_ARRAY)], [doc.alias(alias)]]


def json_field(doc: Column, name: str) -> Column:
    """The VARIANT value of one top-level field (SQL NULL when absent)."""
    return F.try_variant_get(doc, f"$.{name}", "variant")


def json_kind(value: Column) -> Column:
    """The JSON kind of a VARIANT value: string, number, boolean, null, object, array."""
    return kind_of_schema(F.schema_of_variant(value))


def kind_of_schema(schema: Column) -> Column:
    """The JSON kind for a ``schema_of_variant`` text (NULL for NULL)."""
    return (
        F.when(schema.isNull(), F.lit(None))
        .when(schema == "STRING", F.lit("string"))
        .when(
            schema.isin("BIGINT", "INT", "SMALLINT", "TINYINT", "DOUBLE", "FLOAT"), F.lit("number")
        )
        .when(schema.startswith("DECIMAL"), F.lit("number"))
        .when(schema == "BOOLEAN", F.lit("boolean"))
        .when(schema == "VOID", F.lit("null"))
        .when(schema.startswith("OBJECT"), F.lit("object"))
        .when(schema.startswith("ARRAY"), F.lit("array"))
        .otherwise(F.lower(schema))
    )


def as_string(value: Column) -> Column:
    """A VARIANT scalar as text (JSON text for objects and arrays), NULL for JSON null."""
    return F.try_variant_get(value, "$", "string")


def is_blank(text: Column) -> Column:
    """True when the text is empty or only whitespace (the pattern only runs for a text that
    starts with whitespace)."""
    starts_blank = F.substring(text, 1, 1).isin(*BLANK_CHARACTERS)
    return (text == "") | (starts_blank & text.rlike(BLANK_PATTERN))


def json_key_pattern(name: str) -> str:
    """A Java regex for the JSON string ``name``, each character written as itself or as a
    ``\\uXXXX`` escape (hex digits in either case), quotes included."""

    def character(c: str) -> str:
        code = "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{ord(c):04x}")
        return f"(?:{re.escape(c)}|\\\\u{code})"

    return '"' + "".join(character(c) for c in name) + '"'


def number_as_written(raw: Column, name: str) -> Column:
    """The top-level JSON number ``name`` exactly as the line writes it (NULL if not found).

    A number with an exponent or more than 38 digits is a DOUBLE in the VARIANT, which has lost
    the digits a double cannot hold (``1.00000000000000001e0`` is 1.0). Here the line is parsed
    again with every number that follows a ``"<name>":`` key (however its characters are
    escaped) replaced by ``["<number>"]``, and the field's first element is the number's own
    text; a value that was not replaced has no first element (NULL). Only numbers outside
    strings are replaced: inside a JSON string, ``"<name>"`` cannot end in an unescaped quote
    followed by a colon (a key ending in ``\\"<name>`` has its number replaced too, which
    changes nothing here). Costly: only for values that are DOUBLE in the VARIANT (see
    the typed values of :func:`field_value_stages`).
    """
    member = f"({json_key_pattern(name)}[ \\t\\r\\n]*:[ \\t\\r\\n]*)({JSON_NUMBER_PATTERN})"
    quoted = F.regexp_replace(strip_bom(raw), member, '$1["$2"]')
    return F.try_variant_get(F.try_parse_json(quoted), f"$.{name}[0]", "string")


def money_value(number: Column) -> Column:
    """A JSON number's text as DECIMAL(18,4) when it is exactly that, else NULL.

    ``number`` is the number as written, or the VARIANT's exact text of a decimal or integer.
    It has at most 4 decimals when, written as ``digits x 10^exponent`` without trailing zeros,
    ``exponent >= -4``: ``1e2``, ``12.50`` and ``1.5e-3`` do, ``1.00000000000000001e0`` does
    not. The text is only cast once it is known to have no more decimals, so nothing rounds;
    more than 14 integer digits fail the cast (NULL).
    """
    lowered = F.lower(number)
    mantissa = F.substring_index(lowered, "e", 1)
    has_exponent = F.instr(lowered, "e") > 0
    exponent = F.when(has_exponent, F.substring_index(lowered, "e", -1)).otherwise("0")
    fraction = F.when(F.instr(mantissa, ".") > 0, F.substring_index(mantissa, ".", -1))
    fraction = F.coalesce(fraction, F.lit(""))
    digits = F.concat(F.ltrim(F.substring_index(mantissa, ".", 1), F.lit("-")), fraction)
    significant = F.rtrim(digits, F.lit("0"))
    trailing_zeros = F.length(digits) - F.length(significant)
    # decimals = len(fraction) - exponent - trailing_zeros <= 4, without arithmetic on the
    # exponent, which may be any size (an exponent beyond BIGINT is NULL: refused).
    at_most_four = (F.length(fraction) - trailing_zeros - 4) <= exponent.try_cast("bigint")
    return F.when(significant == "", F.lit(0).cast(MONEY_TYPE)).when(
        F.coalesce(at_most_four, F.lit(False)), number.try_cast(MONEY_TYPE)
    )


def parse_event_timestamp(text: Column) -> Column:
    """The timestamp (UTC) when the text is ISO-8601 with a zone, else NULL."""
    return F.when(text.rlike(TIMESTAMP_PATTERN), F.try_to_timestamp(text))
