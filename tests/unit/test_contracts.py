"""Validation rules and quarantine reasons, one record at a time, in batch."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest
from oracle import customer_change, event_is_valid
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from medallion.column_stages import apply_stages
from medallion.contracts import (
    FieldRule,
    field_checks,
    field_clean,
    field_value_stages,
)
from medallion.json_columns import parse_json_line_stages
from medallion.pipelines.retail.contract import CUSTOMER_FIELDS, EVENT_FIELDS
from medallion.pipelines.retail.transforms.customers import validate_changes
from medallion.pipelines.retail.transforms.silver import (
    deduplicate_events,
    quarantined_events,
    valid_events,
    validate_events,
)
from medallion.transforms.bronze import to_bronze

GOOD = {
    "event_id": '"e1"',
    "event_type": '"purchase"',
    "user_id": '"u1"',
    "product_id": '"p1"',
    "revenue": "12.50",
    "event_timestamp": '"2026-11-20T13:45:12Z"',
}


def line(**overrides: str | None) -> str:
    fields = {**GOOD, **overrides}
    return "{" + ", ".join(f'"{k}": {v}' for k, v in fields.items() if v is not None) + "}"


def reasons(spark, *lines: str) -> list[str | None]:
    df = spark.createDataFrame(
        [(x, "f", None) for x in lines], "value string, _source_file string, _ingested_at timestamp"
    )
    validated = validate_events(to_bronze(df, EVENT_FIELDS))
    return [row.reason for row in validated.collect()]


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (line(), None),
        (line(revenue='"12.50"'), "revenue must be a number, got string"),
        (line(user_id=None), "missing field: user_id"),
        (line(user_id="null"), "missing field: user_id"),
        (line(user_id="42"), "user_id must be a string, got number"),
        (line(product_id='"  "'), "product_id is empty"),
        (line(event_type='"refund"'), "unknown event_type: refund"),
        (line(event_timestamp='"2026-11-20T13:45:12"'), "event_timestamp has no time zone"),
        (
            line(event_timestamp='"tomorrow"'),
            "event_timestamp is not an ISO-8601 timestamp with a zone: tomorrow",
        ),
        (
            line(event_timestamp='"2026-13-45T00:00:00Z"'),
            "event_timestamp is not an ISO-8601 timestamp with a zone: 2026-13-45T00:00:00Z",
        ),
        (line(revenue=None), "purchase without revenue"),
        (line(revenue="-1"), "revenue is negative"),
        (
            line(revenue="1.23456"),
            "revenue does not fit decimal(18,4) (at most 14 integer and 4 decimal digits)",
        ),
        (line(revenue="1e400"), "revenue is not a finite number"),
        (line(revenue="true"), "revenue must be a number, got boolean"),
        (line(category="[1]"), "category must be a string, got array"),
        ('{"event_id": "e1", "event_id": "e2"}', "malformed JSON: duplicate key in object"),
        ('{"event_id": "e1"', "malformed JSON: not parseable"),
        (line() + "}", "malformed JSON: not parseable"),
        (line() + " trailing", "malformed JSON: not parseable"),
        ('{"revenue": NaN}', "malformed JSON: not parseable"),
        ("[1, 2]", "not a JSON object: got array"),
        ("42", "not a JSON object: got number"),
        ("null", "not a JSON object: got null"),
        ("\t[1, 2]", "not a JSON object: got array"),
        # Money is never rounded, whatever the notation: a double cannot hold these digits.
        (
            line(revenue="1.00000000000000001e0"),
            "revenue does not fit decimal(18,4) (at most 14 integer and 4 decimal digits)",
        ),
        (
            line(revenue="1.0000000000000000000001"),
            "revenue does not fit decimal(18,4) (at most 14 integer and 4 decimal digits)",
        ),
        (
            line(revenue="1.0000000000000000000000000000000000000001"),
            "revenue does not fit decimal(18,4) (at most 14 integer and 4 decimal digits)",
        ),
        (
            line(revenue="1e-5"),
            "revenue does not fit decimal(18,4) (at most 14 integer and 4 decimal digits)",
        ),
        (
            line(revenue="1e14"),
            "revenue does not fit decimal(18,4) (at most 14 integer and 4 decimal digits)",
        ),
        # Zone offsets are those of Java's ZoneOffset: at most 18 hours, minutes 00-59.
        (
            line(event_timestamp='"2026-11-20T10:00:00+19:00"'),
            "event_timestamp has a zone offset outside -18:00..+18:00: 2026-11-20T10:00:00+19:00",
        ),
        (
            line(event_timestamp='"2026-11-20T10:00:00-19:00"'),
            "event_timestamp has a zone offset outside -18:00..+18:00: 2026-11-20T10:00:00-19:00",
        ),
        (
            line(event_timestamp='"2026-11-20T10:00:00+18:30"'),
            "event_timestamp has a zone offset outside -18:00..+18:00: 2026-11-20T10:00:00+18:30",
        ),
        (
            line(event_timestamp='"2026-11-20T10:00:00+05:60"'),
            "event_timestamp has a zone offset outside -18:00..+18:00: 2026-11-20T10:00:00+05:60",
        ),
        # Only one byte-order mark is ignored.
        ("\ufeff\ufeff" + line(), "malformed JSON: not parseable"),
        # Whitespace that is not JSON's is not accepted around the object.
        ("\x0b" + line(), "malformed JSON: not parseable"),
        ("\f" + line(), "malformed JSON: not parseable"),
        ("\u00a0" + line(), "malformed JSON: not parseable"),
    ],
)
def test_each_rule_gives_a_specific_reason(spark, raw, reason):
    assert reasons(spark, raw) == [reason]


def test_json_whitespace_before_and_after_the_object_is_accepted(spark):
    raws = [
        "\t" + line(),
        "\r" + line(),
        "\n" + line(),
        " \t\r\n" + line() + " \t\r\n",
        "\ufeff\t" + line(),
        line() + "\t",
    ]
    assert reasons(spark, *raws) == [None] * len(raws)


@pytest.mark.parametrize("ending", ["\n", "\r", "\r\n"])
def test_a_timestamp_string_ending_in_a_line_terminator_is_refused(spark, ending):
    with_zone = json.dumps("2026-11-20T10:00:00Z" + ending)
    without_zone = json.dumps("2026-11-20T10:00:00" + ending)
    got = reasons(spark, line(event_timestamp=with_zone), line(event_timestamp=without_zone))
    prefix = "event_timestamp is not an ISO-8601 timestamp with a zone: 2026-11-20T10:00:00"
    assert [reason.startswith(prefix) for reason in got] == [True, True], got


def test_only_java_whitespace_makes_a_required_string_empty(spark):
    """U+0085 and U+2028 are line terminators to Java's ``$``, not whitespace to the contract."""
    got = reasons(
        spark,
        line(user_id='"\\u0085"'),
        line(user_id='"\\u2028"'),
        line(user_id='" \\n\\t"'),
        "\u0085",
    )
    assert got == [None, None, "user_id is empty", "malformed JSON: not parseable"]


def _changes(spark, *lines: str):
    df = spark.createDataFrame(
        [(x, "f", None) for x in lines], "value string, _source_file string, _ingested_at timestamp"
    )
    return validate_changes(to_bronze(df, CUSTOMER_FIELDS)).collect()


def change_line(**overrides: str) -> str:
    fields = {
        "customer_id": '"c1"',
        "operation": '"UPDATE"',
        "sequence_num": "3",
        "updated_at": '"2026-11-20T10:00:00Z"',
        **overrides,
    }
    return "{" + ", ".join(f'"{k}": {v}' for k, v in fields.items()) + "}"


def test_customer_changes_follow_the_same_strict_rules(spark):
    raws = [
        change_line(),
        "\t" + change_line(),
        change_line(updated_at=json.dumps("2026-11-20T10:00:00Z\n")),
        change_line(updated_at=json.dumps("2026-11-20T10:00:00Z\r\n")),
        change_line(updated_at='"2026-11-20T10:00:00+19:00"'),
        change_line(updated_at='"2026-11-20T10:00:00-18:00"'),
        change_line(sequence_num="3e0"),
        change_line(sequence_num='"3\\n"'),
        change_line(customer_id='"\\u2028"'),
    ]
    rows = _changes(spark, *raws)
    assert [row.reason for row in rows] == [
        None,
        None,
        "updated_at is not an ISO-8601 timestamp with a zone: 2026-11-20T10:00:00Z\n",
        "updated_at is not an ISO-8601 timestamp with a zone: 2026-11-20T10:00:00Z\r\n",
        "updated_at has a zone offset outside -18:00..+18:00: 2026-11-20T10:00:00+19:00",
        None,
        "sequence_num must be an integer, got 3.0",
        "sequence_num must be an integer, got string",
        None,
    ]
    assert [customer_change(raw) is not None for raw in raws] == [r.reason is None for r in rows]


# Lines at the edges of the contract, on which the product and the oracle must agree.
EDGE_LINES = (
    "\t" + line(),
    "\r" + line(),
    line() + "\r",
    "\ufeff" + line(),
    "\ufeff\ufeff" + line(),
    "\x0b" + line(),
    line(event_timestamp=json.dumps("2026-11-20T10:00:00Z\n")),
    line(event_timestamp=json.dumps("2026-11-20T10:00:00Z\r")),
    line(event_timestamp=json.dumps("2026-11-20T10:00:00Z\r\n")),
    line(event_timestamp='"2026-11-20T10:00:00+18:00"'),
    line(event_timestamp='"2026-11-20T10:00:00-18:00"'),
    line(event_timestamp='"2026-11-20T10:00:00+19:00"'),
    line(event_timestamp='"2026-11-20T10:00:00-19:00"'),
    line(event_timestamp='"2026-11-20T10:00:00+18:01"'),
    line(event_timestamp='"2026-11-20T10:00:00+05:60"'),
    line(user_id='"\\u0085"'),
    line(revenue="1e2"),
    line(revenue="1.5e1"),
    line(revenue="1.00000000000000001e0"),
    line(revenue="1.0000000000000000000001"),
    line(revenue="1.23456789012345678e13"),
    line(revenue="9.99999999999999999e13"),
    line(revenue="1e14"),
    line(revenue="10e-5"),
    line(revenue="1e-999999999"),
    line(revenue="0e99999999999999999999"),
    line(revenue="1" + "0" * 400),
    line(revenue="1e400"),
    line(revenue="-0e0"),
)


def test_the_oracle_agrees_with_the_product_on_edge_lines(spark):
    got = reasons(spark, *EDGE_LINES)
    disagreements = [
        (raw, reason)
        for raw, reason in zip(EDGE_LINES, got, strict=True)
        if (reason is None) != (event_is_valid(raw) is not None)
    ]
    assert not disagreements


def test_several_failures_are_all_listed(spark):
    [reason] = reasons(spark, line(user_id=None, revenue='"1"'))
    assert reason == "missing field: user_id; revenue must be a number, got string"


def test_valid_variants_of_timestamps_bom_extra_fields_and_views_without_revenue(spark):
    raws = [
        line(event_timestamp='"2026-11-20T13:45:12.123456+05:30"'),
        "\ufeff" + line(event_timestamp='"2026-11-20T13:45:12.120Z"'),
        line(event_type='"view"', revenue=None, extra='{"nested": [1, {"x": null}]}'),
        line(revenue="1e2"),
        line(revenue="0"),
        line(revenue="1.5e1"),
        line(revenue="1E+2"),
        line(revenue="10e-5"),
        line(revenue="-0e0"),
        line(event_timestamp='"2026-11-20T13:45:12+18:00"'),
        line(event_timestamp='"2026-11-20T13:45:12-18:00"'),
    ]
    assert reasons(spark, *raws) == [None] * len(raws)


def test_money_in_exponent_form_keeps_every_digit(spark):
    """A number with an exponent is a double in the VARIANT: its value comes from the line."""
    raws = [
        line(revenue="1.23456789012345678e13"),
        line(revenue="9.99999999999999999e13"),
        line(revenue="1e2"),
        line(revenue="12.50"),
        line(revenue="0"),
        line(revenue="2.5e-3"),
        # The key written with escapes, and a nested key of the same name, change nothing.
        line(revenue=None, **{"rev\\u0065\\u006Eue": "1.5e1"}),
        line(extra='{"revenue": 1e0}', revenue="7.25e0"),
    ]
    df = spark.createDataFrame(
        [(raw, "f", None) for raw in raws],
        "value string, _source_file string, _ingested_at timestamp",
    )
    got = [
        row.revenue for row in valid_events(validate_events(to_bronze(df, EVENT_FIELDS))).collect()
    ]
    assert got == [
        Decimal("12345678901234.5678"),
        Decimal("99999999999999.9999"),
        Decimal("100.0000"),
        Decimal("12.5000"),
        Decimal("0.0000"),
        Decimal("0.0025"),
        Decimal("15.0000"),
        Decimal("7.2500"),
    ]


def test_valid_events_have_typed_utc_columns(spark):
    df = spark.createDataFrame(
        [(line(event_timestamp='"2026-11-20T13:45:12.123456+05:30"'), "f1", None)],
        "value string, _source_file string, _ingested_at timestamp",
    )
    got = valid_events(validate_events(to_bronze(df, EVENT_FIELDS))).select(
        "event_id", "revenue", "event_timestamp", "event_date"
    )
    expected = spark.createDataFrame(
        [
            (
                "e1",
                Decimal("12.5000"),
                dt.datetime(2026, 11, 20, 8, 15, 12, 123456),
                dt.date(2026, 11, 20),
            )
        ],
        "event_id string, revenue decimal(18,4), event_timestamp timestamp, event_date date",
    )
    assertDataFrameEqual(got, expected)


def test_bronze_strips_only_the_last_cr_of_a_line(spark):
    """A line ending "\\r\\r" loses one "\\r" (its CRLF ending); the other is JSON whitespace."""
    df = spark.createDataFrame(
        [(line() + "\r\r", "f"), (line(event_type='"refund"') + "\r\r", "f"), ("\r\r", "f")],
        "value string, _source_file string",
    ).withColumn("_ingested_at", F.current_timestamp())
    got = [(row._raw, row.reason) for row in validate_events(to_bronze(df, EVENT_FIELDS)).collect()]
    assert got == [
        (line() + "\r", None),
        (line(event_type='"refund"') + "\r", "unknown event_type: refund"),
    ]


def test_bronze_keeps_every_non_blank_line_and_strips_crlf(spark):
    df = spark.createDataFrame(
        [(line() + "\r", "f"), ("", "f"), ("  \t", "f"), ("garbage", "f")],
        "value string, _source_file string",
    ).withColumn("_ingested_at", F.current_timestamp())
    bronze = to_bronze(df, EVENT_FIELDS)
    assertDataFrameEqual(
        bronze.select("event_id", "revenue", "_raw"),
        spark.createDataFrame(
            [("e1", "12.5", line()), (None, None, "garbage")],
            "event_id string, revenue string, _raw string",
        ),
    )


def test_quarantine_keeps_the_raw_line_and_reason(spark):
    df = spark.createDataFrame(
        [("oops", "f", None)], "value string, _source_file string, _ingested_at timestamp"
    )
    got = quarantined_events(validate_events(to_bronze(df, EVENT_FIELDS))).select("reason", "_raw")
    assertDataFrameEqual(
        got,
        spark.createDataFrame(
            [("malformed JSON: not parseable", "oops")], "reason string, _raw string"
        ),
    )


def test_deduplicate_keeps_the_first_arrival(spark):
    rows = [
        (
            "e1",
            "view",
            "u1",
            "p1",
            None,
            None,
            dt.datetime(2026, 1, 1),
            dt.date(2026, 1, 1),
            dt.datetime(2026, 1, 2),
            "b",
        ),
        (
            "e1",
            "view",
            "u1",
            "p1",
            None,
            None,
            dt.datetime(2026, 1, 1),
            dt.date(2026, 1, 1),
            dt.datetime(2026, 1, 1),
            "a",
        ),
        (
            "e2",
            "view",
            "u2",
            "p1",
            None,
            None,
            dt.datetime(2026, 1, 1),
            dt.date(2026, 1, 1),
            dt.datetime(2026, 1, 3),
            "c",
        ),
    ]
    schema = (
        "event_id string, event_type string, user_id string, product_id string, category string, "
        "revenue decimal(18,4), event_timestamp timestamp, event_date date, _ingested_at timestamp, _source_file string"
    )
    got = deduplicate_events(spark.createDataFrame(rows, schema)).select("event_id", "_source_file")
    assertDataFrameEqual(
        got,
        spark.createDataFrame([("e1", "a"), ("e2", "c")], "event_id string, _source_file string"),
    )


# Values of every JSON kind, valid and not, for each kind of field.
_FIELD_VALUES = (
    "null",
    '""',
    '" "',
    '"\\tx"',
    '"x"',
    '"view"',
    '"2026-11-20T13:45:12Z"',
    '"2026-11-20T13:45:12+05:30"',
    '"2026-11-20T13:45:12+19:00"',
    '"2026-11-20T13:45:12"',
    '"1899-12-31T23:59:59Z"',
    '"2200-01-01T00:00:00Z"',
    '"12.5"',
    "0",
    "-0.0",
    "12.50",
    "-3",
    "1.5e-3",
    "1e400",
    "1.00001",
    "123456789012345.5",
    "9223372036854775808",
    "1.0",
    "true",
    "{}",
    "[1]",
)


@pytest.mark.parametrize(
    "rule",
    [
        FieldRule("f", kind, required, allowed)
        for kind in ("string", "money", "decimal", "number", "integer", "timestamp")
        for required in (True, False)
        for allowed in ((), ("view", "x"))
        if not allowed or kind == "string"
    ],
    ids=str,
)
def test_a_clean_field_breaks_none_of_its_rules(spark, rule):
    """field_clean lets a contract skip a field's rules: it must never hold for a value that
    breaks one, and it holds for the plainly valid values."""
    checks = field_checks(rule)
    raw = spark.createDataFrame([("{" + f'"f": {v}' + "}",) for v in _FIELD_VALUES], "_raw string")
    stages = (*parse_json_line_stages(F.col("_raw")), *field_value_stages(F.col("_doc"), (rule,)))
    columns = apply_stages(raw, stages)
    judged = columns.select(
        "_raw",
        field_clean(rule).alias("clean"),
        *[F.coalesce(c.build()[0], F.lit(False)).alias(c.name) for c in checks],
    ).collect()
    for row in judged:
        broken = [c.name for c in checks if row[c.name]]
        assert not (row["clean"] and broken), (row["_raw"], broken)
        assert row["clean"] is not None
    clean_lines = {row["_raw"] for row in judged if row["clean"]}
    unbroken = {row["_raw"] for row in judged if not any(row[c.name] for c in checks)}
    # What is not clean but breaks no rule is a blank or blank-looking text, nothing else.
    assert unbroken - clean_lines <= {'{"f": ""}', '{"f": " "}', '{"f": "\\tx"}'}


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1}',
        '{"a": 1}}',
        '{"a": 1}]',
        '{"a": 1}] ',
        '{"a": [1, 2]}',
        '{"a": [1]}]',
        '{"a": "]"}',
        '{"a": "]"}}',
        '{"a": 1}, {"b": 2}',
        '{"a": 1}, "k": 2',
        "1, 2",
        "1, null",
        "[1]",
        "[1]]",
        "[1], 2]",
        '"x"',
        "null",
        "\ufeff{}",
        "{} ",
        "",
        "[",
    ],
)
def test_a_line_is_parsed_only_when_it_is_exactly_one_json_value(spark, text):
    raw = spark.createDataFrame([(text,)], "_raw string")
    doc = apply_stages(raw, parse_json_line_stages(F.col("_raw"))).select(
        F.to_json("_doc").alias("json")
    )
    try:
        expected = json.loads(text.removeprefix("\ufeff"))
    except json.JSONDecodeError:
        assert doc.first()["json"] is None
    else:
        assert json.loads(doc.first()["json"]) == expected
