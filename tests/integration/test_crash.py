"""SIGKILL a real running pipeline mid-batch, rerun, and converge to the exact tables."""

from __future__ import annotations

import signal
import time

from lake_checks import assert_lake_matches
from oracle import expected_from
from processes import (
    batch_in_flight,
    committed_batches,
    kill_group,
    run_medallion,
    start_medallion,
    wait_until,
)

from medallion.generate import generate


def test_sigkill_mid_batch_then_rerun_is_exactly_once_and_sigterm_exits_cleanly(
    spark, config, dirs, tmp_path
):
    landing, lake = dirs
    log = tmp_path / "run.log"
    stream_args = (
        "run",
        "--landing",
        str(landing),
        "--lake",
        str(lake),
        "--stream",
        "--interval",
        "0.5",
        "--max-files-per-trigger",
        "1",
    )
    generate(str(landing), events=1200, customers=50, files=6, seed=21)

    # Kill 1: while bronze has a batch planned but not committed.
    # Kill 2: while silver (a MERGE in foreachBatch, with a quarantine append) is mid-batch.
    for seed, stream in ((22, "bronze_events"), (23, "silver_events")):
        process = start_medallion(*stream_args, log_path=log)
        checkpoint = lake / "_checkpoints" / stream
        assert wait_until(lambda cp=checkpoint: committed_batches(cp) >= 1, timeout=180), log.read_text()[
            -3000:
        ]
        generate(str(landing), events=600, customers=0, files=3, seed=seed)
        assert wait_until(lambda cp=checkpoint: batch_in_flight(cp), timeout=120), log.read_text()[-3000:]
        kill_group(process)
        assert process.returncode == -signal.SIGKILL

    # A clean stop: SIGTERM ends the run after its batches in flight, exit code 0.
    process = start_medallion(*stream_args, log_path=log)
    assert wait_until(
        lambda: committed_batches(lake / "_checkpoints" / "gold_hourly_product_metrics") >= 3,
        timeout=180,
    )
    process.send_signal(signal.SIGTERM)
    started = time.monotonic()
    assert process.wait(timeout=120) == 0, log.read_text()[-3000:]
    assert time.monotonic() - started < 120

    # Then an available-now run drains whatever is left.
    result = run_medallion("run", "--landing", str(landing), "--lake", str(lake))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "silver/events" in result.stdout
    assert_lake_matches(spark, config, expected_from(landing))
