"""Operations helpers without a pipeline: lineage, checkpoints, retention, schema, monitoring."""

from __future__ import annotations

import io
import json
import logging
import time
import uuid

import pytest
from pyspark.sql.streaming.listener import QueryProgressEvent
from pyspark.sql.types import DecimalType, StringType, StructField, StructType

from medallion.config import Config
from medallion.conflicts import is_write_conflict, retry_on_conflict
from medallion.deployment import checked, tables_of
from medallion.errors import ConfigError
from medallion.ops.lineage import downstream, stream_readers
from medallion.ops.maintain import interval_hours
from medallion.ops.reset import plan_reset
from medallion.streams import checkpoint_files as checkpoints
from medallion.streams import run_monitor
from medallion.streams.flows import flow
from medallion.streams.table_schema import SchemaCheck, compare, is_restartable_schema_change


def test_lineage_is_read_from_the_flows():
    revenue = flow("gold_daily_revenue_by_country")
    assert revenue.inputs == ("silver/events", "silver/customers_history", "silver/customers")
    assert revenue.source.key == "silver/events"
    assert flow("gold_customer_changes").source.key == "silver/customers"
    assert [f.name for f in stream_readers("silver/events")] == [
        "gold_hourly_product_metrics",
        "gold_daily_revenue_by_country",
    ]
    flows, tables = downstream(["silver/customers"])
    assert [f.name for f in flows] == [
        "silver_customers",
        "gold_customer_changes",
        "gold_daily_revenue_by_country",
    ]
    # A stream is rebuilt whole: resetting customers rebuilds its tombstones, quarantine and
    # history.
    assert tables == [
        "silver/customers",
        "silver/customer_tombstones",
        "silver/customers_history",
        "silver/customers_quarantine",
        "gold/customer_changes",
        "gold/daily_revenue_by_country",
        "gold/revenue_purchases",
    ]


def test_reset_plans_cover_downstream_and_bronze_rebuilds_everything(tmp_path):
    config = Config(landing=str(tmp_path / "landing"), lake=str(tmp_path / "lake"))
    plan = plan_reset(config, "gold", "gold/hourly_product_metrics")
    # The stream writes the users it counted too: both are rebuilt together.
    assert [t.key for t in plan.tables] == [
        "gold/hourly_product_metrics",
        "gold/hourly_product_users",
    ]
    assert plan.checkpoints == (f"{tmp_path}/lake/_checkpoints/gold_hourly_product_metrics",)
    assert "gold/hourly_product_metrics" in plan.describe()
    bronze = plan_reset(config, "bronze", "bronze/events")
    assert bronze.streams == (
        "bronze_events",
        "silver_events",
        "gold_hourly_product_metrics",
        "gold_daily_revenue_by_country",
    )
    assert "input removed since it was ingested is lost for good" in bronze.describe()
    assert len(plan_reset(config, "bronze").tables) == len(tables_of(config))
    with pytest.raises(ConfigError, match="cannot reset layer 'landing'"):
        plan_reset(config, "landing")
    with pytest.raises(ConfigError, match="not in layer"):
        plan_reset(config, "gold", "silver/events")


def test_carried_columns_are_validated():
    cfg = Config(landing="/l", lake="/k", carried_columns={"silver/events": ["coupon", "campaign"]})
    assert cfg.carried("silver/events") == ("coupon", "campaign")
    assert cfg.carried("silver/transactions") == ()
    for bad, why in (("drop table", "invalid"), ("Revenue", "already"), ("_raw", "already")):
        with pytest.raises(ConfigError, match=why):
            checked(Config(landing="/l", lake="/k", carried_columns={"silver/events": (bad,)}))
    with pytest.raises(ConfigError, match="twice"):
        checked(Config(landing="/l", lake="/k", carried_columns={"silver/events": ("a", "A")}))
    with pytest.raises(ConfigError, match="takes no carried columns"):
        checked(Config(landing="/l", lake="/k", carried_columns={"gold/fraud_alerts": ("a",)}))
    with pytest.raises(ConfigError, match="unknown table"):
        checked(Config(landing="/l", lake="/k", carried_columns={"silver/nothing": ("a",)}))
    with pytest.raises(ConfigError, match="downtime"):
        Config(landing="/l", lake="/k", max_stream_downtime_hours=0)


def test_carry_column_names_its_table_or_the_only_one_that_takes_them():
    from medallion.run_command import carried_columns

    assert carried_columns(["coupon", "silver/events:campaign"], ["retail"]) == {
        "silver/events": ["coupon", "campaign"]
    }
    assert carried_columns(["coupon"], []) == {"silver/events": ["coupon"]}
    with pytest.raises(ConfigError, match="name the table.*none"):
        carried_columns(["coupon"], ["banking"])


def test_delta_intervals_in_hours():
    assert interval_hours("interval 1 week") == 168
    assert interval_hours("interval 7 days") == 168
    assert interval_hours("INTERVAL 2 days 12 hours") == 60
    assert interval_hours("interval 0 hours") == 0
    assert interval_hours("interval 30 minutes") == 0.5


class _Conflict(Exception):
    pass


def test_only_write_conflicts_are_retried():
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise _Conflict("[DELTA_CONCURRENT_DELETE_READ] a concurrent OPTIMIZE removed ...")
        return "done"

    assert retry_on_conflict(flaky, "test", backoff_seconds=0.001) == "done"
    assert len(calls) == 3
    assert not is_write_conflict(ValueError("[DELTA_METADATA_CHANGED] schema changed"))
    with pytest.raises(ValueError):
        retry_on_conflict(lambda: (_ for _ in ()).throw(ValueError("x")), "test")
    assert is_restartable_schema_change(RuntimeError("[DELTA_SCHEMA_CHANGED_WITH_VERSION] v 2"))
    assert not is_restartable_schema_change(RuntimeError("other"))


def test_schema_comparison_finds_renames_and_type_changes():
    expected = StructType(
        [StructField("event_id", StringType()), StructField("revenue", DecimalType(18, 4))]
    )
    assert not compare(expected, expected).breaking
    renamed = StructType(
        [StructField("id", StringType()), StructField("revenue", DecimalType(18, 4))]
    )
    check = compare(renamed, expected)
    assert check.problems == ("column event_id is missing (renamed or dropped)",)
    assert check.unexpected == ("id",)
    retyped = StructType(
        [StructField("EVENT_ID", StringType()), StructField("revenue", StringType())]
    )
    assert compare(retyped, expected).problems == (
        "column revenue is STRING, expected DECIMAL(18,4) (type changed)",
    )
    # An extra column not written yet may be absent; once there, it must be a STRING.
    carried = StructType([*expected.fields, StructField("coupon", StringType())])
    assert not compare(expected, carried, optional=["coupon"]).breaking
    assert compare(expected, carried).breaking
    wrong = StructType([*expected.fields, StructField("coupon", DecimalType(18, 4))])
    assert compare(wrong, carried, optional=["coupon"]).breaking
    wider = StructType([*expected.fields, StructField("coupon", StringType())])
    # A wider table (a column the pipeline does not write) is not breaking; the extra is listed.
    assert compare(wider, expected) == SchemaCheck(problems=(), unexpected=("coupon",))


def _write_log(path, entries):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("v1\n" + "\n".join(json.dumps(e) for e in entries) + "\n")


def test_checkpoint_positions_and_ingested_files(tmp_path):
    cp = tmp_path / "cp"
    (cp / "metadata").parent.mkdir(parents=True)
    (cp / "metadata").write_text('{"id":"x"}')
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": {}}
    for batch, version in ((0, 3), (1, 5), (2, 7)):
        source = {"sourceVersion": 1, "reservoirVersion": version, "index": -1}
        _write_log(cp / "offsets" / str(batch), [meta, source])
    _write_log(cp / "commits" / "0", [{}])
    _write_log(cp / "commits" / "1", [{}])
    # Batch 2 is planned, not committed: a restart replays it from the end of batch 1.
    assert checkpoints.delta_position(str(cp)) == checkpoints.DeltaPosition(5, -1, False)
    assert checkpoints.committed_batch(str(cp)) == 1 and checkpoints.planned_batch(str(cp)) == 2

    landing = tmp_path / "landing"
    landing.mkdir()
    for name in ("a.json", "b c.json", "c.json", ".d.json.tmp", "_e.json"):
        (landing / name).write_text("{}\n")
    uri = f"file://{landing}"
    _write_log(cp / "sources" / "0" / "9.compact", [{"path": f"{uri}/a.json", "batchId": 0}])
    _write_log(cp / "sources" / "0" / "10", [{"path": f"{uri}/b%20c.json", "batchId": 1}])
    _write_log(cp / "sources" / "0" / "11", [{"path": f"{uri}/c.json", "batchId": 2}])
    landed = checkpoints.landed_files(str(landing))
    assert len(landed) == 3
    taken = checkpoints.ingested_files(str(cp), up_to_batch=1)
    assert landed - taken == {str(landing / "c.json")}


def _progress_event(name: str, batch: int, rows: int, executed: bool = True) -> QueryProgressEvent:
    duration = {"triggerExecution": 20, "latestOffset": 2}
    if executed:
        duration["addBatch"] = 15
    return QueryProgressEvent.fromJson(
        {
            "progress": {
                "id": str(uuid.UUID(int=1)),
                "runId": str(uuid.UUID(int=2)),
                "name": name,
                "timestamp": "2026-11-20T10:00:00.123Z",
                "batchId": batch,
                "batchDuration": 20,
                "numInputRows": rows,
                "inputRowsPerSecond": 10.0,
                "processedRowsPerSecond": 50.0,
                "durationMs": duration,
                "stateOperators": [],
                "sources": [
                    {
                        "description": "DeltaSource[file:/lake/bronze/events]",
                        "startOffset": None,
                        "endOffset": '{"reservoirVersion": 2}',
                        "latestOffset": None,
                        "numInputRows": rows,
                        "inputRowsPerSecond": 10.0,
                        "processedRowsPerSecond": 50.0,
                    }
                ],
                "sink": {"description": "ForeachBatchSink", "numOutputRows": -1},
            }
        }
    )


class _FakeStreams:
    def __init__(self):
        self.listeners = []

    def addListener(self, listener):
        self.listeners.append(listener)

    def removeListener(self, listener):
        self.listeners.remove(listener)


class _FakeSpark:
    def __init__(self):
        self.streams = _FakeStreams()


QUERY_ID = uuid.UUID(int=1)


def _started(recorder):
    recorder.onQueryStarted(type("Started", (), {"id": QUERY_ID})())


def test_progress_rows_and_live_progress_without_flooding(monkeypatch, tmp_path, caplog):
    written = []
    monkeypatch.setattr(
        run_monitor, "write_progress", lambda spark, config, rows: written.extend(rows)
    )
    monkeypatch.setattr(run_monitor, "wait_for_listener_bus", lambda spark: None)
    config = Config(landing=str(tmp_path), lake=str(tmp_path))
    caplog.set_level(logging.INFO, logger="medallion.streams.run_monitor")

    # Not a terminal: a log line only when the counts changed, at most every log_seconds.
    run = run_monitor.RunMonitor(
        _FakeSpark(), config, flush_seconds=3600, log_seconds=0.05, live=False
    )
    run.start()
    recorder = run.spark.streams.listeners[0]
    _started(recorder)
    recorder.onQueryProgress(_progress_event("bronze_events", 0, 120))
    recorder.onQueryProgress(_progress_event("silver_events", 0, 100))
    time.sleep(0.5)
    recorder.onQueryProgress(_progress_event("silver_events", 1, 0, executed=False))  # idle
    time.sleep(0.3)
    run.close()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("progress:")]
    assert len(lines) == 1, lines
    assert lines[0].startswith("progress: bronze 120 rows/1 batches | silver 100 rows/1 batches")
    # Every event, idle ones included, is written when the run ends.
    assert [(r["query_name"], r["batch_id"]) for r in written] == [
        ("bronze_events", 0),
        ("silver_events", 0),
        ("silver_events", 1),
    ]
    row = written[0]
    assert row["duration_ms"]["addBatch"] == 15 and row["num_input_rows"] == 120
    assert row["timestamp"].isoformat() == "2026-11-20T10:00:00.123000+00:00"
    assert row["sources"][0]["end_offset"] == '{"reservoirVersion": 2}'
    assert row["sink_description"] == "ForeachBatchSink"
    assert run.spark.streams.listeners == []

    # A terminal: one status line redrawn in place.
    screen = io.StringIO()
    run = run_monitor.RunMonitor(_FakeSpark(), config, flush_seconds=3600, stream=screen, live=True)
    run.start()
    recorder = run.spark.streams.listeners[0]
    recorder.onQueryProgress(_progress_event("gold_x", 0, 5))  # a query of another run: ignored
    _started(recorder)
    recorder.onQueryProgress(_progress_event("gold_x", 0, 5))
    time.sleep(1.3)
    run.close()
    assert "\r\x1b[Kgold 5 rows/1 batches | " in screen.getvalue()
    assert "\n" not in screen.getvalue()


def test_progress_is_written_once_no_query_of_the_run_is_running(monkeypatch, tmp_path):
    written = []
    monkeypatch.setattr(
        run_monitor, "write_progress", lambda spark, config, rows: written.extend(rows)
    )
    monkeypatch.setattr(run_monitor, "wait_for_listener_bus", lambda spark: None)
    config = Config(landing=str(tmp_path), lake=str(tmp_path))
    run = run_monitor.RunMonitor(_FakeSpark(), config, flush_seconds=3600, live=False)
    run.start()
    recorder = run.spark.streams.listeners[0]
    other = type("Other", (), {"id": uuid.UUID(int=2)})()
    recorder.onQueryStarted(other)
    _started(recorder)
    recorder.onQueryProgress(_progress_event("bronze_events", 0, 120))
    recorder.onQueryTerminated(other)
    time.sleep(0.3)
    assert written == []  # a query of the run is still running
    recorder.onQueryTerminated(type("Ended", (), {"id": QUERY_ID})())
    deadline = time.monotonic() + 5
    while not written and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [r["batch_id"] for r in written] == [0]  # before the run's end, not an hour later
    run.close()
    assert len(written) == 1


def test_reset_without_a_terminal_needs_yes_and_deletes_nothing(tmp_path, capsys):
    from medallion.cli import main

    checkpoint = tmp_path / "lake" / "_checkpoints" / "silver_events"
    checkpoint.mkdir(parents=True)
    assert main(["reset", "--lake", str(tmp_path / "lake"), "--layer", "silver"]) == 2
    out, err = capsys.readouterr()
    assert "silver/events" in out and "gold/hourly_product_metrics" in out
    assert "pass --yes" in err
    assert checkpoint.exists()


def test_status_says_which_streams_are_behind_by_lag_and_by_age():
    from datetime import datetime, timezone

    from medallion.ops.status import behind

    def stream(name, lag, at=None, started=True):
        progress = {"at": at} if at else None
        return {"stream": name, "lag": lag, "last_progress": progress, "started": started}

    status = {
        "streams": [
            stream(
                "bronze_a",
                {"kind": "files", "landed": 9, "pending_files": 3},
                "2026-11-26T10:00:00Z",
            ),
            stream("silver_a", {"kind": "delta", "source": "bronze/a", "versions_behind": 1}),
            stream("gold_a", {"kind": "fused", "note": "carried"}),
            stream("bronze_b", {"kind": "files", "note": "give --landing"}, started=False),
        ]
    }
    now = datetime(2026, 11, 26, 10, 30, tzinfo=timezone.utc)
    assert behind(status, now=now) == []
    assert behind(status, max_lag=3, now=now) == []
    assert behind(status, max_lag=0, now=now) == [
        "bronze_a: 3 landed files unread (at most 0)",
        "silver_a: 1 versions of bronze/a unread (at most 0)",
    ]
    assert behind(status, max_age_minutes=45, now=now) == [
        "silver_a: last batch with data none recorded (at most 45 minutes)"
    ]
    assert behind(status, max_age_minutes=20, now=now)[0] == (
        "bronze_a: last batch with data 30 minutes ago (at most 20 minutes)"
    )
