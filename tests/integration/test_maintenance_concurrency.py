"""OPTIMIZE while a continuous run (``run_streaming``, as ``medallion run --stream`` runs it)
writes the same tables."""

from __future__ import annotations

from pathlib import Path

import pytest
from lake_checks import assert_lake_matches
from oracle import expected_from
from processes import committed_batches, wait_until
from stream_thread import StreamInThread

from medallion.ops.maintain import maintain
from medallion.pipelines.retail.generator import generate
from medallion.streams.runner import run_available_now
from medallion.tables import history

pytestmark = pytest.mark.slow  # left out of make test-fast (docs/testing.md)

COMPACTED = ["bronze/events", "silver/events", "gold/hourly_product_metrics"]


def _written_after_optimize(spark, config, key: str) -> bool:
    """True when the table has a write (silver's append, gold's MERGE) after its first
    OPTIMIZE: its stream went on after the compaction."""
    operations = [r.operation for r in history(spark, config.table(key)).collect()]
    first_optimize = len(operations) - 1 - operations[::-1].index("OPTIMIZE")
    return bool({"MERGE", "WRITE"} & set(operations[:first_optimize]))


def test_optimize_runs_beside_a_live_stream_which_continues_without_loss(spark, config, dirs):
    landing, _ = dirs
    generate(str(landing), events=500, customers=20, files=5, seed=31)
    # As `medallion run --stream --interval 0.5 --max-files-per-trigger 1`, in a thread.
    streaming = config.with_options(trigger_interval_seconds=0.5, max_files_per_trigger=1)
    # bronze_events carries each batch through silver and gold (streams/fusion.py).
    gold = Path(config.checkpoint("bronze_events"))
    with StreamInThread(spark, streaming) as stream:
        assert wait_until(lambda: committed_batches(gold) >= 1 or not stream.running, 300)
        optimized = []
        for round_ in range(2):
            done = committed_batches(gold)
            results = maintain(spark, config, COMPACTED, vacuum_retention_hours=None)
            optimized += [r.table for r in results if r.optimized]
            # New files after each compaction, so every layer has to write after it.
            generate(str(landing), events=200, customers=0, files=2, seed=32 + round_)
            assert stream.running
            # The stream goes on committing batches after each compaction.
            assert wait_until(
                lambda d=done: committed_batches(gold) > d or not stream.running, timeout=300
            )
        assert optimized, "no OPTIMIZE committed"
        # The files landed after the last compaction reach silver and gold while it streams.
        rewritten = set(optimized) & {"silver/events", "gold/hourly_product_metrics"}
        assert wait_until(
            lambda: (
                all(_written_after_optimize(spark, config, k) for k in rewritten)
                or not stream.running
            ),
            timeout=300,
        )
        assert stream.running
    for key in rewritten:
        assert _written_after_optimize(spark, config, key), f"{key}: no write after OPTIMIZE"
    # An available-now run drains the rest.
    run_available_now(spark, config)
    assert_lake_matches(spark, config, expected_from(landing))
