"""Validation rules and quarantine reasons, one record at a time, in batch."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from medallion.transforms.bronze import to_bronze
from medallion.transforms.silver import (
    deduplicate_events,
    quarantined_events,
    valid_events,
    validate_events,
)

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
    validated = validate_events(to_bronze(df))
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
    ],
)
def test_each_rule_gives_a_specific_reason(spark, raw, reason):
    assert reasons(spark, raw) == [reason]


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
    ]
    assert reasons(spark, *raws) == [None] * len(raws)


def test_valid_events_have_typed_utc_columns(spark):
    df = spark.createDataFrame(
        [(line(event_timestamp='"2026-11-20T13:45:12.123456+05:30"'), "f1", None)],
        "value string, _source_file string, _ingested_at timestamp",
    )
    got = valid_events(validate_events(to_bronze(df))).select(
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


def test_bronze_keeps_every_non_blank_line_and_strips_crlf(spark):
    df = spark.createDataFrame(
        [(line() + "\r", "f"), ("", "f"), ("  \t", "f"), ("garbage", "f")],
        "value string, _source_file string",
    ).withColumn("_ingested_at", F.current_timestamp())
    bronze = to_bronze(df)
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
    got = quarantined_events(validate_events(to_bronze(df))).select("reason", "_raw")
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
