"""Operating the lake: progress recording, status and lag, replay after a reset (in-process)."""

from __future__ import annotations

from collections import Counter

from lake_checks import assert_change_feed_audited, assert_lake_matches, lake_snapshot
from oracle import expected_from

from medallion.generate import generate, write_file_atomically
from medallion.ops.monitor import read_progress
from medallion.ops.reset import execute_reset, plan_reset
from medallion.ops.status import lake_status, render_status
from medallion.streams.flows import FLOWS, flow
from medallion.streams.runner import run_available_now

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
    assert "DeltaSink" in bronze.sink_description or bronze.sink_description

    # Caught up: no lag anywhere; then one new file lands and only bronze runs.
    status = lake_status(spark, config, str(landing))
    tables = {t["table"]: t for t in status["tables"]}
    assert tables["silver/events"]["rows"] == len(expected_from(landing).silver)
    assert tables["bronze/events"]["last_operation"] == "STREAMING UPDATE"
    streams = _streams(status)
    assert streams["bronze_events"]["lag"]["pending_files"] == 0
    assert streams["silver_events"]["lag"]["versions_behind"] == 0
    assert streams["gold_hourly_product_metrics"]["last_progress"]["input_rows"] > 0
    write_file_atomically(str(landing / "events"), "new.json", [NEW_EVENT])
    lag = _streams(lake_status(spark, config, str(landing)))["bronze_events"]["lag"]
    assert lag["pending_files"] == 1 and lag["landed"] == len(list((landing / "events").iterdir()))
    run_available_now(spark, config, (flow("bronze_events"),))
    status = lake_status(spark, config, str(landing))
    assert _streams(status)["bronze_events"]["lag"]["pending_files"] == 0
    assert _streams(status)["silver_events"]["lag"]["versions_behind"] == 1
    text = render_status(status)
    assert "1 versions of bronze/events unread" in text

    # Reset silver (and so gold): the next run rebuilds the same tables from bronze.
    run_available_now(spark, config)
    before = lake_snapshot(spark, config)
    plan = plan_reset(config, "silver")
    assert {t.key for t in plan.tables} == {
        t.key for t in config.tables() if t.layer in ("silver", "gold")
    }
    assert set(plan.streams) == {f.name for f in FLOWS if f.layer != "bronze"}
    execute_reset(spark, config, plan)
    assert not (config.lake and (dirs[1] / "silver" / "events").exists())
    assert not (dirs[1] / "_checkpoints" / "silver_events").exists()
    assert (dirs[1] / "_checkpoints" / "bronze_events").exists()
    run_available_now(spark, config)
    after = lake_snapshot(spark, config)
    # The audit trail records the commits of silver/customers, which are new after a rebuild.
    audit = "gold/customer_changes"
    assert {k: v for k, v in after.items() if k != audit} == {
        k: v for k, v in before.items() if k != audit
    }
    assert_change_feed_audited(spark, config)
    assert_lake_matches(spark, config, expected_from(landing))
