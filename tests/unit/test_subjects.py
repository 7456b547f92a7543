"""Data subjects (issue 29, erasure): the declared columns, the rows of a table that belong to a
subject, raw lines included, and the scope predicate of a recompute."""

from __future__ import annotations

import hashlib
import hmac
from datetime import date, datetime, timezone

import pytest
from pyspark.sql import functions as F

from medallion.declarations import Flow, Landing, Pipeline, Table
from medallion.erasure_key import ErasureKey, erasure_key, keyed_hash, keyed_hash_column
from medallion.errors import ConfigError
from medallion.pipelines import pipelines
from medallion.subjects import Recompute, Subjects, scope_predicate, subject_rows

RETAIL_SUBJECTS = Subjects({"events": "user_id", "customers": "customer_id"})


def test_each_pipeline_declares_its_subject_columns_and_what_is_recomputed():
    declared = {p.name: p.subjects for p in pipelines()}
    assert declared["iot"] is None  # device readings name no person
    assert declared["retail"].column_names == ("customer_id", "user_id")
    assert [r.table for r in declared["retail"].recomputes] == [
        "gold/hourly_product_metrics",
        "gold/daily_revenue_by_country",
    ]
    assert declared["banking"].column_names == ("account_id",)
    assert declared["banking"].recomputes == ()


def test_a_raw_line_is_the_subjects_when_a_declared_field_of_it_holds_the_id(spark):
    lines = [
        ("1", '{"event_id": "e1", "user_id": "u1", "revenue": "3"}'),
        ("2", '{"event_id": "e2", "user_id": "u10"}'),  # another id that starts alike
        ("3", '{"event_id": "e3", "user_id": "xu1"}'),
        ("4", '{"event_id": "e4", "user_id": "u1", "revenue": '),  # malformed, cut short
        ("5", '{"event_id": "e5", "product_id": "u1"}'),  # the id as another field's value
        ("6", None),
        ("7", '{"user_id": "u1\\"x"}'),  # the JSON text of u1"x, not of u1
        ("8", '{"customer_id": "u1", "country": "US"}'),  # retail's other subject field
        ("9", '{"event_id": "e9", "context": {"user_id": "u1"}}'),  # not a top-level field
        ("10", '{"user_id" : "u1"  '),  # malformed, spaced
        ("11", '{"event_id": "e11", "user_id": "u2", "note": "\\"user_id\\": \\"u1\\""}'),
    ]
    bronze = spark.createDataFrame(lines, "n STRING, _raw STRING").withColumn(
        "user_id", F.lit(None)
    )
    picked = bronze.where(subject_rows(bronze.columns, RETAIL_SUBJECTS, "u1"))
    assert sorted(r.n for r in picked.collect()) == ["1", "10", "4", "8"]
    quoted = bronze.where(subject_rows(bronze.columns, RETAIL_SUBJECTS, 'u1"x'))
    assert [r.n for r in quoted.collect()] == ["7"]
    # A country is no subject's id: only a subject field holding it would make a line theirs.
    assert bronze.where(subject_rows(bronze.columns, RETAIL_SUBJECTS, "US")).isEmpty()


def test_a_typed_table_is_matched_by_its_subject_columns_and_a_table_without_any_by_none(spark):
    rows = [("c1", "u1"), ("u1", "c2"), ("c3", None)]
    table = spark.createDataFrame(rows, "customer_id STRING, user_id STRING")
    picked = table.where(subject_rows(table.columns, RETAIL_SUBJECTS, "u1"))
    assert sorted(r.customer_id for r in picked.collect()) == ["c1", "u1"]
    assert subject_rows(["window_start", "views"], RETAIL_SUBJECTS, "u1") is None


def test_the_keyed_hash_is_an_hmac_under_the_key_the_same_in_spark_and_never_shows_the_key(spark):
    key = ErasureKey.parse("k" * 32)
    other = ErasureKey.parse("m" * 32)
    one = keyed_hash(key, "u1")
    assert one == hmac.new(b"k" * 32, b"u1", hashlib.sha256).hexdigest()
    assert one != keyed_hash(other, "u1") and len(one) == 64
    ids = spark.createDataFrame([("u1",), ("ü2",), (None,)], "user_id STRING")
    in_spark = [r.h for r in ids.select(keyed_hash_column(key)("user_id").alias("h")).collect()]
    assert in_spark == [one, keyed_hash(key, "ü2"), None]
    assert "k" * 8 not in repr(key) and key.check != other.check
    # The key is not in the query plan either (a failed stream's error prints the plan).
    plan = ids.select(keyed_hash_column(key)("user_id"))._jdf.queryExecution().toString()
    assert "k" * 8 not in plan and "6b6b6b6b" not in plan.lower()


def test_no_key_is_refused_with_the_command_that_makes_one_and_a_short_key_too(monkeypatch):
    monkeypatch.delenv("MEDALLION_ERASURE_KEY")
    assert erasure_key() is None
    with pytest.raises(ConfigError, match="secrets.token_urlsafe"):
        erasure_key(required=True)
    monkeypatch.setenv("MEDALLION_ERASURE_KEY", "short")
    with pytest.raises(ConfigError, match="too short"):
        erasure_key()


def test_the_scope_predicate_quotes_values_and_refuses_zoned_times(spark):
    frame = spark.createDataFrame(
        [("it's", date(2026, 1, 1)), ("x' OR '1'='1", date(2026, 1, 2)), ("b", None)],
        "country STRING, event_date DATE",
    )
    assert [r.country for r in frame.where(scope_predicate("country", ["it's"])).collect()] == [
        "it's"
    ]
    both = frame.where(scope_predicate("event_date", [date(2026, 1, 2), date(2026, 1, 1), None]))
    assert both.count() == 2
    with pytest.raises(ValueError, match="naive"):
        scope_predicate("window_start", [datetime(2026, 1, 1, tzinfo=timezone.utc)])
    with pytest.raises(ValueError, match="no value"):
        scope_predicate("event_date", [None])


def test_a_pipeline_whose_erasure_would_miss_a_table_is_refused():
    bronze = Table("bronze", "visits", "_raw STRING, visitor STRING")
    silver = Table("silver", "visits", "visitor STRING, page STRING")
    gold = Table("gold", "page_views", "page STRING, views BIGINT")
    flows = (
        Flow("bronze_visits", "bronze", Landing("visits"), (bronze,), lambda *_: None),
        Flow("silver_visits", "silver", bronze, (silver,), lambda *_: None),
        Flow("gold_views", "gold", silver, (gold,), lambda *_: None),
    )
    tables = (bronze, silver, gold)
    with pytest.raises(ValueError, match="gold/page_views has no subject column"):
        Pipeline("visits", tables, flows, subjects=Subjects({"visits": "visitor"}))
    with pytest.raises(ValueError, match="subjects name datasets it does not land: orders"):
        Pipeline("visits", tables, flows, subjects=Subjects({"orders": "visitor"}))
    recompute = Recompute("gold/page_views", "silver/visits", "page", lambda d: d, lambda *a: a[2])
    declared = Pipeline(
        "visits", tables, flows, subjects=Subjects({"visits": "visitor"}, (recompute,))
    )
    assert declared.subjects.recompute_of("gold/page_views") is recompute
    wrong_scope = Recompute("gold/page_views", "silver/visits", "day", lambda d: d, lambda *a: a[2])
    with pytest.raises(ValueError, match="no scope column 'day'"):
        Pipeline("visits", tables, flows, subjects=Subjects({"visits": "visitor"}, (wrong_scope,)))
