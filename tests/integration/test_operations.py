"""Operating the lake: progress recording, status and lag, replay after a reset (in-process)."""

from __future__ import annotations

import json
import os
import time
from collections import Counter

import pytest
from lake_checks import assert_change_feed_audited, assert_lake_matches, lake_snapshot
from oracle import expected_from

from medallion.config import Config
from medallion.console import plain
from medallion.deployment import tables_of
from medallion.generate import write_file_atomically
from medallion.ops.maintain import VacuumRefused, data_files, files_on_disk, maintain, vacuum
from medallion.ops.reset import execute_reset, plan_reset
from medallion.ops.status import lake_status, render_status
from medallion.pipelines.retail.flows import FLOWS
from medallion.pipelines.retail.generator import generate
from medallion.source_options import DeltaSourceOptions
from medallion.streams.flows import flow
from medallion.streams.fusion import is_member
from medallion.streams.progress import read_progress
from medallion.streams.runner import run_available_now
from medallion.tables import history, read_table

pytestmark = pytest.mark.slow  # left out of make test-fast (docs/testing.md)

NEW_EVENT = (
    '{"event_id": "late-arrival", "event_type": "view", "user_id": "u1", "product_id": "p1", '
    '"event_timestamp": "2026-11-20T10:00:00Z"}'
)


def _streams(status: dict) -> dict:
    return {s["stream"]: s for s in status["streams"]}


def test_progress_is_recorded_status_shows_lag_and_a_reset_layer_is_rebuilt_equal(
    spark, config, dirs
):
    landing, _ = dirs
    generate(str(landing), events=400, customers=60, files=2, seed=5)
    report = run_available_now(spark, config)

    # Every progress event of the run is in <lake>/_system/stream_progress, none twice.
    progress = read_progress(spark, config)
    assert progress is not None
    rows = progress.collect()
    recorded = Counter(r.query_name for r in rows)
    assert recorded == Counter({name: n for name, n in report.batches.items() if n})
    assert len({(r.run_id, r.batch_id) for r in rows}) == len(rows)
    bronze = next(r for r in rows if r.query_name == "bronze_events" and r.num_input_rows)
    assert "addBatch" in bronze.duration_ms and bronze.timestamp is not None
    assert bronze.sources[0].description.startswith("FileStreamSource")
    # bronze_events carries each batch through bronze, silver and gold in one foreachBatch.
    assert bronze.sink_description == "ForeachBatchSink"
    assert set(report.batches) == {f.name for f in FLOWS if not is_member(f)}

    # Caught up: no lag anywhere; then one new file lands and only the events run.
    status = lake_status(spark, config, str(landing))
    tables = {t["table"]: t for t in status["tables"]}
    assert tables["silver/events"]["rows"] == len(expected_from(landing).silver)
    assert tables["bronze/events"]["last_operation"] == "WRITE"
    streams = _streams(status)
    assert streams["bronze_events"]["lag"]["pending_files"] == 0
    assert streams["silver_events"]["lag"] == {
        "kind": "fused",
        "note": "carried by bronze_events (no lag of its own)",
    }
    assert streams["gold_daily_revenue_by_country"]["lag"]["versions_behind"] == 0
    assert streams["bronze_events"]["last_progress"]["input_rows"] > 0
    write_file_atomically(str(landing / "events"), "new.json", [NEW_EVENT])
    lag = _streams(lake_status(spark, config, str(landing)))["bronze_events"]["lag"]
    assert lag["pending_files"] == 1 and lag["landed"] == len(list((landing / "events").iterdir()))
    run_available_now(spark, config, (flow("bronze_events"),))
    status = lake_status(spark, config, str(landing))
    assert _streams(status)["bronze_events"]["lag"]["pending_files"] == 0
    assert _streams(status)["gold_daily_revenue_by_country"]["lag"]["versions_behind"] == 1
    text = plain(render_status(status))
    assert "1 versions of silver/events unread" in text
    assert "carried by bronze_events" in text

    # Reset silver (and so gold): the next run rebuilds the same tables from bronze, silver
    # and gold of the events catching up from their checkpoints, which then go.
    run_available_now(spark, config)
    before = lake_snapshot(spark, config)
    plan = plan_reset(config, "silver")
    assert {t.key for t in plan.tables} == {
        t.key for t in tables_of(config) if t.layer in ("silver", "gold")
    }
    assert set(plan.streams) >= {f.name for f in FLOWS if f.layer != "bronze"}
    execute_reset(spark, config, plan)
    checkpoints = dirs[1] / "_checkpoints"
    assert not (dirs[1] / "silver" / "events").exists()
    assert list((checkpoints / "silver_events").iterdir()) == []  # catches up from bronze
    assert list((checkpoints / "gold_hourly_product_metrics").iterdir()) == []
    assert not (checkpoints / "silver_customers").exists()
    assert (checkpoints / "bronze_events").exists()
    report = run_available_now(spark, config)
    assert report.batches["silver_events"] >= 1
    assert report.batches["gold_hourly_product_metrics"] >= 1
    assert not (checkpoints / "silver_events").exists()
    assert not (checkpoints / "gold_hourly_product_metrics").exists()
    after = lake_snapshot(spark, config)
    # The audit trail records the commits of silver/customers, which are new after a rebuild.
    audit = "gold/customer_changes"
    assert {k: v for k, v in after.items() if k != audit} == {
        k: v for k, v in before.items() if k != audit
    }
    assert_change_feed_audited(spark, config)
    assert_lake_matches(spark, config, expected_from(landing))
    # From now on bronze_events carries silver and gold again.
    write_file_atomically(str(landing / "events"), "newer.json", [NEW_EVENT.replace("late-", "2-")])
    report = run_available_now(spark, config)
    assert "silver_events" not in report.batches
    assert_lake_matches(spark, config, expected_from(landing))


def _delta_actions(table_path, version: int) -> list[dict]:
    log_file = table_path / "_delta_log" / f"{version:020d}.json"
    return [json.loads(line) for line in log_file.read_text().splitlines() if line.strip()]


def test_compaction_is_not_reread_downstream_and_vacuum_keeps_what_a_lagging_stream_needs(
    spark, dirs
):
    landing, lake = dirs
    # Without skipChangeCommits a Delta source fails on any data-changing rewrite upstream, so
    # this run proves that OPTIMIZE commits are dataChange=false and skipped by readers.
    config = Config(
        landing=str(landing),
        lake=str(lake),
        delta_source=DeltaSourceOptions(skip_change_commits=False),
        max_stream_downtime_hours=0.0001,
    )
    generate(str(landing), events=300, customers=0, files=3, seed=7)
    run_available_now(spark, config)
    silver = config.table("silver/events")
    read_before = read_table(spark, silver).count()
    generate(str(landing), events=150, customers=0, files=2, seed=8)
    # The events alone: gold_daily_revenue_by_country, which reads silver, now lags behind it.
    run_available_now(spark, config, (flow("bronze_events"),))
    unread = read_table(spark, silver).count() - read_before

    results = {r.table: r for r in maintain(spark, config, vacuum_retention_hours=None)}
    compacted = results["silver/events"]
    assert compacted.optimized and compacted.files_before >= 2 and compacted.files_after == 1
    assert compacted.zorder == ("event_date", "event_id")
    version = history(spark, silver, 1).collect()[0]
    assert version.operation == "OPTIMIZE"
    actions = _delta_actions(lake / "silver" / "events", version.version)
    files = [a.get("add") or a.get("remove") for a in actions if "add" in a or "remove" in a]
    assert files and not any(f["dataChange"] for f in files)

    # Below Delta's retention check, or not above the stream downtime: refused, nothing runs.
    with pytest.raises(VacuumRefused, match="below Delta's retention check"):
        maintain(spark, config, ["silver/events"], vacuum_retention_hours=1)
    spark.sql(
        f"ALTER TABLE {silver.sql_name} SET TBLPROPERTIES "
        "('delta.deletedFileRetentionDuration' = 'interval 0 hours')"
    )
    with pytest.raises(VacuumRefused, match="maximum stream downtime"):
        maintain(spark, config, ["silver/events"], vacuum_retention_hours=0.0001)
    # The files OPTIMIZE just removed are the ones the revenue stream has not read yet: refused.
    on_disk = files_on_disk(silver)
    with pytest.raises(
        VacuumRefused, match="stream gold_daily_revenue_by_country still has to read"
    ):
        maintain(spark, config, ["silver/events"], vacuum_retention_hours=0.0002)
    assert files_on_disk(silver) == on_disk

    # The lagging stream catches up and reads each new row once, not the compacted copies.
    report = run_available_now(spark, config)
    assert report.table("gold/daily_revenue_by_country").rows_in == unread
    assert_lake_matches(spark, config, expected_from(landing))

    # Now nothing lags: VACUUM deletes the small files, and streams resume after it.
    time.sleep(1.0)
    vacuumed = maintain(spark, config, ["silver/events"], 0.0002, run_optimize=False)
    assert vacuumed[0].vacuumed_files == on_disk - 1
    assert files_on_disk(silver) == 1
    generate(str(landing), events=100, customers=0, files=1, seed=9)
    run_available_now(spark, config)
    assert_lake_matches(spark, config, expected_from(landing))


def test_vacuum_runs_only_when_a_file_is_older_than_its_retention(spark, config):
    """VACUUM deletes only files modified before its cutoff: a table with none is left alone
    (no Spark job, no VACUUM commit); once a file is that old, VACUUM runs and deletes what
    it may, keeping a removed file whose removal is younger than the retention."""
    table = config.table("silver/events")
    spark.range(3).write.format("delta").save(table.path)
    spark.range(4).write.format("delta").mode("overwrite").save(table.path)
    assert vacuum(spark, table, 168) is None
    assert "VACUUM START" not in {r.operation for r in history(spark, table).collect()}

    folder = os.path.abspath(table.path)
    stray = os.path.join(folder, "part-00000-left-by-a-failed-write.parquet")
    with open(stray, "wb") as out:
        out.write(b"not referenced by any version")
    week_and_a_day_ago = time.time() - 192 * 3600
    for name in os.listdir(folder):
        if name.endswith(".parquet"):
            os.utime(os.path.join(folder, name), (week_and_a_day_ago, week_and_a_day_ago))
    before = data_files(table)
    assert vacuum(spark, table, 168) == 1  # the stray file; the overwritten one is kept
    assert not os.path.exists(stray) and data_files(table) == before - 1
    assert "VACUUM END" in {r.operation for r in history(spark, table).collect()}
    assert read_table(spark, table).count() == 4
