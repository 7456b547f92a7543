"""OPTIMIZE while a real ``medallion run --stream`` process writes the same tables."""

from __future__ import annotations

import signal

import pytest
from lake_checks import assert_lake_matches
from oracle import expected_from
from processes import committed_batches, kill_group, start_medallion, wait_until

from medallion.ops.maintain import maintain
from medallion.pipelines.retail.generator import generate
from medallion.streams.runner import run_available_now
from medallion.tables import history

COMPACTED = ["bronze/events", "silver/events", "gold/hourly_product_metrics"]


def _written_after_optimize(spark, config, key: str) -> bool:
    """True when the table has a write (silver's append, gold's MERGE) after its first
    OPTIMIZE: its stream went on after the compaction."""
    operations = [r.operation for r in history(spark, config.table(key)).collect()]
    first_optimize = len(operations) - 1 - operations[::-1].index("OPTIMIZE")
    return bool({"MERGE", "WRITE"} & set(operations[:first_optimize]))


@pytest.mark.slow
def test_optimize_runs_beside_a_live_stream_which_continues_without_loss(
    spark, config, dirs, tmp_path
):
    landing, lake = dirs
    log = tmp_path / "stream.log"
    generate(str(landing), events=500, customers=20, files=5, seed=31)
    process = start_medallion(
        "run", "--landing", str(landing), "--lake", str(lake), "--stream",
        "--interval", "0.5", "--max-files-per-trigger", "1",
        log_path=log,
    )  # fmt: skip
    # bronze_events carries each batch through silver and gold (streams/fusion.py).
    gold = lake / "_checkpoints" / "bronze_events"
    try:
        assert wait_until(lambda: committed_batches(gold) >= 1, timeout=300), log.read_text()[
            -3000:
        ]
        optimized = []
        for round_ in range(2):
            done = committed_batches(gold)
            results = maintain(spark, config, COMPACTED, vacuum_retention_hours=None)
            optimized += [r.table for r in results if r.optimized]
            # New files after each compaction, so every layer has to write after it.
            generate(str(landing), events=200, customers=0, files=2, seed=32 + round_)
            assert process.poll() is None, log.read_text()[-3000:]
            # The stream goes on committing batches after each compaction.
            assert wait_until(lambda d=done: committed_batches(gold) > d, timeout=300), (
                log.read_text()[-3000:]
            )
        assert optimized, "no OPTIMIZE committed"
        # The files landed after the last compaction reach silver and gold while it streams.
        rewritten = set(optimized) & {"silver/events", "gold/hourly_product_metrics"}
        assert wait_until(
            lambda: all(_written_after_optimize(spark, config, k) for k in rewritten), timeout=300
        ), log.read_text()[-3000:]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=300) == 0, log.read_text()[-3000:]
    finally:
        if process.poll() is None:
            kill_group(process)

    for key in rewritten:
        assert _written_after_optimize(spark, config, key), f"{key}: no write after OPTIMIZE"
    # An available-now run drains the rest (in this process: the stream's own run is done).
    run_available_now(spark, config)
    assert_lake_matches(spark, config, expected_from(landing))
