"""What operators and clocks do around the pipeline: a creation cut short, old and future file
times, a lost checkpoint, two runs at once, a reset during a stream."""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest
from lake_checks import assert_customers_match, assert_lake_matches, lake_snapshot, rows_of
from lake_copy import copy_lake
from oracle import expected_customers, expected_from
from processes import wait_until
from stream_thread import StreamInThread

from medallion.cli import main
from medallion.config import Config
from medallion.console import plain
from medallion.gaps import recorded_gaps
from medallion.generate import write_file_atomically
from medallion.ops.status import lake_status, render_status
from medallion.pipelines.retail.contract import EVENT_FIELDS
from medallion.pipelines.retail.flows import FLOWS
from medallion.pipelines.retail.generator import generate
from medallion.streams.fusion import is_member
from medallion.streams.progress import read_progress
from medallion.streams.runner import PipelineError, run_available_now
from medallion.streams.sources import landing_lines
from medallion.tables import table_exists
from medallion.transforms.bronze import to_bronze

pytestmark = pytest.mark.slow  # left out of make test-fast (docs/testing.md)

DAY = 24 * 3600


def _event(event_id: str, hour: int = 10) -> str:
    return json.dumps(
        {
            "event_id": event_id,
            "event_type": "view",
            "user_id": "u1",
            "product_id": "p1",
            "event_timestamp": f"2026-11-20T{hour:02d}:00:00Z",
        }
    )


def _land(landing: Path, name: str, lines: list[str], mtime: float | None = None) -> None:
    write_file_atomically(str(landing / "events"), name, lines)
    if mtime is not None:
        os.utime(landing / "events" / name, (mtime, mtime))


def _bronze_ids(spark, config) -> set[str]:
    return {r.event_id for r in rows_of(config, "bronze/events")}


def test_a_table_creation_cut_short_by_a_kill_is_created_again_on_an_odd_lake_path(spark, tmp_path):
    # The lake path has a backslash, a backtick, a quote and a semicolon: they reach SQL escaped.
    landing, lake = tmp_path / "landing", tmp_path / "la`ke;x\\y'z"
    config = Config(landing=str(landing), lake=str(lake))
    # What a SIGKILL during the first run's table creation leaves: a log with no commit, with
    # an empty _staged_commits/, nothing at all, or the temp file of a commit never renamed.
    for folder in ("bronze/events", "silver/customers", "_system/stream_progress"):
        (lake / folder / "_delta_log" / "_staged_commits").mkdir(parents=True)
    (lake / "silver" / "events" / "_delta_log").mkdir(parents=True)
    log = lake / "gold" / "hourly_product_metrics" / "_delta_log"
    log.mkdir(parents=True)
    (log / ".00000000000000000000.json.3f9c1c2e-7d1b-4c39-9a55-0c4b8f1e2a77.tmp").write_text("{}")
    assert not table_exists(spark, config.table("bronze/events"))
    generate(str(landing), events=300, customers=40, files=2, seed=11)

    run_available_now(spark, config)

    assert_lake_matches(spark, config, expected_from(landing))
    assert_customers_match(spark, config, expected_customers(landing))
    assert read_progress(spark, config).count() > 0
    assert spark.table("medallion.silver_events").count() == len(expected_from(landing).silver)


def test_files_landing_with_old_or_far_future_times_are_all_ingested(spark, config, dirs):
    landing, _ = dirs
    _land(landing, "first.json", [_event("a1")])
    run_available_now(spark, config)

    now = time.time()
    _land(landing, "backfill.json", [_event("old1"), _event("old2")], mtime=now - 30 * DAY)
    _land(landing, "skewed.json", [_event("future1")], mtime=now + 365 * DAY)
    run_available_now(spark, config)
    # A normal file after one from the future: by the default maxFileAge it would look a year
    # "too old".
    _land(landing, "after.json", [_event("next1")])
    _land(landing, "ancient.json", [_event("epoch1")], mtime=1.0)
    run_available_now(spark, config)

    assert _bronze_ids(spark, config) == {"a1", "old1", "old2", "future1", "next1", "epoch1"}
    assert_lake_matches(spark, config, expected_from(landing))


def test_a_landing_file_replaced_under_its_name_is_refused_and_shown_until_landed_anew(
    spark, config, dirs
):
    landing, _ = dirs
    name = "events-2026-11-20.json"
    path = landing / "events" / name
    _land(landing, name, [_event("r1"), _event("r2")])
    run_available_now(spark, config)
    first_mtime = path.stat().st_mtime

    # The producer writes the same name again (one event re-sent, one new), keeping the old
    # modification time as `cp -p` would: the size gives it away.
    _land(landing, name, [_event("r2"), _event("r3"), _event("r4")], mtime=first_mtime)
    with pytest.raises(PipelineError) as refused:
        run_available_now(spark, config)
    message = str(refused.value)
    assert message.startswith(
        "stream 'bronze_events': a landing file was replaced under the same name after it was ingested: "
    ), message
    assert f"mv {name} events-2026-11-20.v2.json" in message and "\n" not in message
    # A plain rewrite: a new modification time.
    _land(landing, name, [_event("r2"), _event("r3")], mtime=first_mtime + 60)
    with pytest.raises(PipelineError, match="replaced under the same name"):
        run_available_now(spark, config)
    status = lake_status(spark, config, str(landing))
    lag = next(s for s in status["streams"] if s["stream"] == "bronze_events")["lag"]
    assert len(lag["replaced_files"]) == 1 and str(path) in lag["replaced_files"][0]
    assert "1 REPLACED after ingestion, new content not read" in plain(render_status(status))
    assert _bronze_ids(spark, config) == {"r1", "r2"}

    # The documented way forward: land the new version under a new name.
    path.rename(path.with_name("events-2026-11-20.v2.json"))
    run_available_now(spark, config)
    bronze = rows_of(config, "bronze/events")
    assert sorted(r.event_id for r in bronze) == ["r1", "r2", "r2", "r3"]
    silver = rows_of(config, "silver/events")
    assert sorted(r.event_id for r in silver) == ["r1", "r2", "r3"]
    assert lake_status(spark, config, str(landing))["streams"][0]["lag"]["replaced_files"] == []


def _list_next_bronze_batch_then_die(spark, config: Config) -> None:
    """What a crash leaves after Spark listed bronze's next batch and before it wrote it:
    the batch's files are in the checkpoint's logs, nothing is in bronze."""

    def die(batch, batch_id):
        raise RuntimeError("killed before the batch was written")

    query = (
        to_bronze(landing_lines(spark, config, "events"), EVENT_FIELDS)
        .writeStream.foreachBatch(die)
        .option("checkpointLocation", config.checkpoint("bronze_events"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match="killed before the batch was written"):
        query.awaitTermination()


def test_a_landed_file_deleted_before_it_was_read_is_refused_until_put_back_or_skipped_on_record(
    spark, config, dirs
):
    landing, _ = dirs
    _land(landing, "a.json", [_event("a1"), _event("a2")])
    run_available_now(spark, config)
    _land(landing, "b.json", [_event("b1"), _event("b2")])
    _land(landing, "c.json", [_event("c1")])
    _list_next_bronze_batch_then_die(spark, config)
    gone = landing / "events" / "b.json"
    kept = gone.read_bytes()
    gone.unlink()

    # Spark would replay the batch without the file and say nothing: the run refuses instead.
    with pytest.raises(PipelineError) as refused:
        run_available_now(spark, config)
    message = str(refused.value)
    assert message.startswith("stream 'bronze_events': a landed file listed for batch "), message
    assert str(gone) in message and "--skip-missing-files" in message and "\n" not in message
    assert _bronze_ids(spark, config) == {"a1", "a2"}

    # Way out 1: put it back.
    gone.write_bytes(kept)
    run_available_now(spark, config)
    assert _bronze_ids(spark, config) == {"a1", "a2", "b1", "b2", "c1"}
    assert recorded_gaps(spark, config) == []

    # Way out 2: accept the loss; it is recorded, and status shows it.
    _land(landing, "d.json", [_event("d1")])
    _list_next_bronze_batch_then_die(spark, config)
    (landing / "events" / "d.json").unlink()
    with pytest.raises(PipelineError, match="skip-missing-files"):
        run_available_now(spark, config)
    assert (
        main(["run", "--landing", str(landing), "--lake", config.lake, "--skip-missing-files"]) == 0
    )
    gaps = recorded_gaps(spark, config)
    assert [(g["stream"], g["kind"], g["file_path"]) for g in gaps] == [
        ("bronze_events", "missing file", str(landing / "events" / "d.json"))
    ]
    run_available_now(spark, config)  # nothing more is recorded
    assert len(recorded_gaps(spark, config)) == 1
    assert_lake_matches(spark, config, expected_from(landing))
    status = lake_status(spark, config, str(landing))
    assert status["data_gaps"] == 1
    assert "1 input gap recorded" in plain(render_status(status))


def test_a_bounded_backlog_and_an_alter_table_during_the_run_lose_nothing(
    spark, config, dirs, caplog
):
    landing, _ = dirs
    generate(str(landing), events=2000, customers=0, files=10, seed=15)
    # A backlog ten times one batch: one landing file a batch (as --max-files-per-trigger 1);
    # each batch goes through bronze, silver and gold in bronze_events (streams/fusion.py).
    bounded = config.with_options(max_files_per_trigger=1)
    caplog.set_level(logging.INFO, logger="medallion.streams.runner")
    restarted = "a concurrent commit changed a table's metadata under its write; restarting it"
    silver = config.table("silver/events")
    silver_started = Path(config.checkpoint("bronze_events")) / "offsets" / "0"
    done = threading.Event()

    def alter_while_silver_merges() -> None:
        # An operator's ALTER TABLE during the run, until one lands under a silver write.
        wait_until(lambda: done.is_set() or silver_started.exists(), 600, 0.01)
        n = 0
        while not done.is_set() and restarted not in caplog.text:
            spark.sql(
                f"ALTER TABLE {silver.sql_name} SET TBLPROPERTIES ('medallion.touch' = '{n}')"
            )
            n += 1

    operator = threading.Thread(target=alter_while_silver_merges, daemon=True)
    operator.start()
    try:
        report = run_available_now(spark, bounded)
    finally:
        done.set()
        operator.join(60)
    assert report.batches["bronze_events"] >= 10, report.batches
    # An operator's ALTER TABLE landed under a silver write: the query was restarted.
    assert f"bronze_events: {restarted}" in caplog.text
    assert_lake_matches(spark, config, expected_from(landing))


def test_a_lost_checkpoint_is_refused_for_every_stream_and_reset_rebuilds_without_doubling(
    spark, reference_lake, tmp_path, capsys
):
    # A copy of the shared reference lake, whose retail streams ran two deliveries.
    landing, lake = copy_lake(reference_lake, tmp_path / "copy")
    config = Config(landing=str(landing), lake=str(lake), pipelines=("retail",))
    before = lake_snapshot(spark, config)

    # A stream fused into another has no checkpoint of its own (streams/fusion.py).
    for flow in (f for f in FLOWS if not is_member(f)):
        checkpoint = Path(config.checkpoint(flow.name))
        aside = checkpoint.with_name(f"{flow.name}.moved")
        checkpoint.rename(aside)
        with pytest.raises(PipelineError) as refused:
            run_available_now(spark, config, (flow,))
        message = str(refused.value)
        assert message.startswith(f"stream '{flow.name}' has no checkpoint at {checkpoint}"), (
            message
        )
        layer = flow.writes[0].split("/")[0]
        assert f"medallion reset --lake {lake} --layer {layer} --table {flow.writes[0]}" in message
        assert "\n" not in message
        aside.rename(checkpoint)
    assert lake_snapshot(spark, config) == before, "a refused start wrote something"

    # The way out: reset what the lost checkpoint fed, then run; nothing is doubled.
    shutil.rmtree(config.checkpoint("bronze_events"))
    capsys.readouterr()
    assert (
        main(["run", "--landing", str(landing), "--lake", str(lake), "--pipeline", "retail"]) == 1
    )
    assert "has no checkpoint at" in capsys.readouterr().err
    reset = ["reset", "--lake", str(lake), "--layer", "bronze", "--table", "bronze/events", "--yes"]
    assert main(reset) == 0
    run_available_now(spark, config)
    assert_lake_matches(spark, config, expected_from(landing))
    assert_customers_match(spark, config, expected_customers(landing))


def _lock_message(output: str, stream: str, pid: int) -> None:
    assert f"stream '{stream}' is already being written by another run" in output, output
    assert f"host {socket.gethostname()}, pid {pid}, since 20" in output, output


def test_a_second_run_and_a_reset_are_refused_while_a_stream_runs(spark, dirs, capsys):
    """The continuous run holds its streams' locks: in this process, through the CLI's entry
    point, a second run and a reset are refused naming the holder; once it stops, no lock is
    left and another run goes ahead. (SIGTERM to the process group of a `--stream` run is the
    crash suite's last step: tests/integration/test_reliability.py.)"""
    landing, lake = dirs
    generate(str(landing), events=600, customers=60, files=3, seed=13)
    config = Config(landing=str(landing), lake=str(lake), trigger_interval_seconds=1)
    with StreamInThread(spark, config) as stream:
        bronze_checkpoint = lake / "_checkpoints" / "bronze_events"
        assert wait_until(lambda: (bronze_checkpoint / "commits" / "0").exists(), 300)
        assert stream.running

        capsys.readouterr()
        assert main(["run", "--landing", str(landing), "--lake", str(lake)]) == 2
        _lock_message(capsys.readouterr().err, "bronze_events", os.getpid())
        assert main(["reset", "--lake", str(lake), "--layer", "silver", "--yes"]) == 2
        _lock_message(capsys.readouterr().err, "silver_events", os.getpid())
        assert (lake / "silver" / "events" / "_delta_log").is_dir()
    assert not list((lake / "_checkpoints" / "_locks").glob("*.lock")), "locks left behind"

    # Now another run goes ahead, and the lake is exact.
    run_available_now(spark, config)
    assert_lake_matches(spark, config, expected_from(landing))
