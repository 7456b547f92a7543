"""medallion's backfill: everything landed, through every layer, with available-now triggers.

    .venv/bin/python benchmarks/ours.py --landing DIR --workdir DIR

The same code path as ``medallion run`` (``run_available_now``, tables left unnamed), in a
fresh lake under the work dir, or with ``--continue`` in the lake already there (a later
delivery). Prints one ``BENCH_RESULT`` line: session start, the run's wall time and per-layer
times, row counts and the gold totals (summed with ``deltalake``, no JVM).
"""

from __future__ import annotations

import time
from pathlib import Path

from peers.common import finish, fresh_workdir, gold_totals, parse_args

from medallion.config import Config
from medallion.session import get_spark
from medallion.streams.run_size import run_jvm_options
from medallion.streams.runner import run_available_now


def main() -> None:
    args = parse_args(__doc__, can_continue=True)
    lake = str(Path(args.workdir).resolve()) if args.continue_lake else fresh_workdir(args.workdir)
    config = Config(landing=args.landing, lake=lake)
    started = time.monotonic()
    # As `medallion run` does: C1 alone when the run has little to read.
    java = run_jvm_options(config, streaming=False)
    spark = get_spark(app_name="medallion-bench", master="local[2]", java=java)
    session_s = time.monotonic() - started

    started = time.monotonic()
    # As `medallion run` does: a run in a process of its own leaves the tables unnamed.
    report = run_available_now(spark, config, register_names=False)
    wall_s = time.monotonic() - started

    finish(
        {
            "peer": "medallion",
            "session_s": round(session_s, 2),
            "wall_s": round(wall_s, 2),
            # The events' stages inside the fused stream (bronze, silver, gold), and each flow's
            # wall time (the customer flows run beside the events).
            "layers_s": report.stage_seconds,
            "flows_s": report.flow_seconds,
            "bronze_rows": report.table("bronze/events").total_rows,
            "silver_rows": report.table("silver/events").total_rows,
            "quarantined": report.table("silver/events_quarantine").total_rows,
            "customer_changes": report.table("bronze/customers").total_rows,
            "gold": gold_totals(config.table("gold/hourly_product_metrics").path or ""),
        }
    )


if __name__ == "__main__":
    main()
