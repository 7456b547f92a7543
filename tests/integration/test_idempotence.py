"""Replaying a micro-batch (as Spark does after a crash) writes nothing twice."""

from __future__ import annotations

import json

from lake_checks import rows_of
from pyspark.sql import functions as F

from medallion.pipelines.retail.catch_up import GoldHourlyBatch, SilverEventsBatch
from medallion.pipelines.retail.contract import EVENT_FIELDS
from medallion.streams.flows import flow
from medallion.streams.sinks import TXN_APP_ID, TXN_VERSION, append_batch, idempotent_writes
from medallion.tables import ensure_tables, read_table
from medallion.transforms.bronze import to_bronze

LINES = [
    '{"event_id": "a", "event_type": "view", "user_id": "u1", "product_id": "p1", "event_timestamp": "2026-11-20T01:00:00Z"}',
    '{"event_id": "b", "event_type": "purchase", "user_id": "u2", "product_id": "p1", "revenue": 5, "event_timestamp": "2026-11-20T01:30:00Z"}',
    '{"event_id": "a", "event_type": "view", "user_id": "u1", "product_id": "p1", "event_timestamp": "2026-11-20T01:00:00Z"}',
    "broken",
]


def _fake_checkpoint(path, query_id="q-1"):
    path.mkdir(parents=True, exist_ok=True)
    (path / "metadata").write_text(json.dumps({"id": query_id}))
    return str(path)


def _bronze_batch(spark):
    lines = spark.createDataFrame([(x, "f1") for x in LINES], "value string, _source_file string")
    return to_bronze(
        lines.withColumn("_ingested_at", F.lit("2026-11-20 02:00:00").cast("timestamp")),
        EVENT_FIELDS,
    )


def test_silver_batch_replayed_with_the_same_id_changes_nothing(spark, config, tmp_path):
    ensure_tables(spark, config)
    process = SilverEventsBatch(config, flow("silver_events"), _fake_checkpoint(tmp_path / "cp"))
    batch = _bronze_batch(spark)
    process(batch, 0)
    process(batch, 0)  # the replay after a crash between the writes and the checkpoint commit
    silver = read_table(spark, config.table("silver/events"))
    quarantine = read_table(spark, config.table("silver/events_quarantine"))
    assert sorted(r.event_id for r in silver.collect()) == ["a", "b"]
    assert quarantine.count() == 1
    # The quarantine append is what txnAppId/txnVersion protects: a new batch id appends again.
    process(batch, 1)
    assert quarantine.count() == 2
    assert silver.count() == 2  # silver's MERGE only inserts unseen event_ids


def test_txn_app_id_and_version_skip_a_repeated_append(spark, config):
    ensure_tables(spark, config)
    table = config.table("silver/events_quarantine")
    rows = spark.createDataFrame(
        [("x", "why", "raw", "f", None)],
        "event_id string, reason string, _raw string, _source_file string, _ingested_at timestamp",
    )
    for version in (7, 7, 6, 8):
        with idempotent_writes(spark, "app-1", version):
            append_batch(rows, table)
    assert read_table(spark, table).count() == 2  # versions 7 and 8 only
    assert spark.conf.get(TXN_APP_ID, None) is None and spark.conf.get(TXN_VERSION, None) is None


def test_gold_batch_replay_adds_nothing_twice(spark, config, tmp_path):
    ensure_tables(spark, config)
    silver_process = SilverEventsBatch(
        config, flow("silver_events"), _fake_checkpoint(tmp_path / "s")
    )
    silver_process(_bronze_batch(spark), 0)
    gold_process = GoldHourlyBatch(
        config, flow("gold_hourly_product_metrics"), _fake_checkpoint(tmp_path / "g")
    )
    silver_batch = read_table(spark, config.table("silver/events"))
    gold_process(silver_batch, 0)
    first = rows_of(config, "gold/hourly_product_metrics")
    users = config.table("gold/hourly_product_users")
    assert read_table(spark, users).count() == 2
    gold_process(silver_batch, 0)  # the replay after a crash: both writes are skipped
    again = rows_of(config, "gold/hourly_product_metrics")
    assert first == again
    assert [(r.views, r.purchases, int(r.revenue), r.unique_users) for r in again] == [(1, 1, 5, 2)]
    assert read_table(spark, users).count() == 2
