"""A delivery on a large lake: medallion's ``run`` against Declarative Pipelines' refresh.

    .venv/bin/python benchmarks/refresh.py [--history 1500000] [--delivery 40000]
                                           [--repeat 3] [--workdir DIR]

The history lake is the ``incremental`` part's (benchmarks/incremental.py: ``--history``
generated events, built once by medallion and kept), and so is the delivery: 40,000 new events
with re-sent copies of history events and late events. With the delivery landed:

- **medallion** continues the history lake (``benchmarks/ours.py --continue``: one process, the
  same code path as ``medallion run``), ``--repeat`` times from the same copy; the median of
  its run time counts, session start excluded.
- **Declarative Pipelines** (benchmarks/peers/sdp_peer.py) runs over the whole landing
  folder. Its silver and gold are materialized views, recomputed from all of bronze on every
  refresh; only its bronze, a streaming table, would read just the new files. What a refresh
  cannot avoid is therefore the two views' flows: their seconds (``recompute_s``) are the
  comparison, and the whole run's (``pipeline_s``, bronze of every file included) is reported
  beside them. Both exclude the JVMs' and session's start.

    Why not a second ``spark-pipelines run`` over the first one's tables: on Spark 4.2 its
    catalog lives in memory, so the second run finds the tables' folders but not the tables
    and fails (DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION); with a Hive metastore (Derby), a
    table declared with ``format="delta"`` fails it (DELTA_CANNOT_CHANGE_PROVIDER), and with
    Delta as the default format it starts, but takes its views' inputs for tables outside the
    pipeline, runs the three flows at once, and gold is computed from a silver it has just
    emptied: 0 rows (tried on a 20,000-event lake, 2026-11-29; docs/benchmarks.md).

Both golds must be identical, row for row (read with ``deltalake``, no JVM). Prints one
``BENCH_RESULT`` line; ``ratio`` is ``recompute_s`` over medallion's median run time.
"""

from __future__ import annotations

import argparse
import statistics
from decimal import Decimal
from pathlib import Path

from incremental import delivery_lines, history_lake, landed, restore
from measure import REPO, run_child
from peers.common import finish

GOLD_COLUMNS = (
    "window_start",
    "product_id",
    "views",
    "add_to_carts",
    "purchases",
    "revenue",
    "unique_users",
)


def gold_rows(path: Path) -> set[tuple]:
    """A gold table's rows (its metric columns), revenue as an exact decimal."""
    from deltalake import DeltaTable

    rows = DeltaTable(str(path)).to_pyarrow_table(columns=list(GOLD_COLUMNS)).to_pylist()
    return {
        tuple(
            Decimal(str(r[c])).quantize(Decimal("0.0001")) if c == "revenue" else r[c]
            for c in GOLD_COLUMNS
        )
        for r in rows
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--history", type=int, default=1_500_000, help="events in the history")
    parser.add_argument("--delivery", type=int, default=40_000, help="new events in the delivery")
    parser.add_argument("--repeat", type=int, default=3, help="medallion runs; the median counts")
    parser.add_argument("--workdir", type=Path, default=REPO / "build" / "bench" / "incremental")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    logs = args.workdir / "refresh-logs"
    root = history_lake(args.workdir, args.history, args.workdir / "incremental.log")
    lines = delivery_lines(root / "landing", args.delivery)
    landing, sdp_dir = str(root / "landing"), root / "sdp"
    ours = []
    with landed(root / "landing", lines):
        for i in range(args.repeat):
            lake = restore(root)
            run = run_child(
                ["benchmarks/ours.py", "--landing", landing, "--workdir", str(lake), "--continue"],
                logs / f"ours-{i}.log",
                3600.0,
            )
            ours.append(run.result["wall_s"])
            print(f"medallion: {run.result['wall_s']} s", flush=True)
        ours_gold = gold_rows(lake / "gold" / "hourly_product_metrics")
        sdp = run_child(
            ["benchmarks/peers/sdp_peer.py", "--landing", landing, "--workdir", str(sdp_dir)],
            logs / "sdp.log",
            3600.0,
        ).result
    restore(root)
    sdp_gold = gold_rows(sdp_dir / "warehouse" / "gold_hourly_product_metrics")
    flows = sdp["flows_s"]
    recompute_s = round(flows["silver_events"] + flows["gold_hourly_product_metrics"], 2)
    median = statistics.median(ours)
    print(f"Declarative Pipelines: views {recompute_s} s, run {sdp['pipeline_s']} s", flush=True)
    finish(
        {
            "history_events": args.history,
            "delivery_lines": len(lines),
            "medallion": {"wall_s": median, "runs_s": ours},
            "sdp": {
                "recompute_s": recompute_s,
                "pipeline_s": sdp["pipeline_s"],
                "flows_s": flows,
            },
            "gold_rows": len(ours_gold),
            "gold_identical": ours_gold == sdp_gold,
            "gold_rows_differing": len(ours_gold ^ sdp_gold),
            "ratio": round(recompute_s / median, 2),
            "ratio_whole_run": round(sdp["pipeline_s"] / median, 2),
        }
    )


if __name__ == "__main__":
    main()
