"""What an exactly-once write costs in Delta: appends with and without txnAppId/txnVersion.

    .venv/bin/python benchmarks/tagged_writes.py [--rows 3000] [--writes 30] [--workdir DIR]

Every write of a medallion stream carries (``txnAppId``, ``txnVersion``) so that a replayed
batch writes nothing twice. Delta checks the pair against the table's recorded transactions
(``OptimisticTransaction.txnVersion``), which Delta 4.4 reads from the snapshot's reconstructed
state (``Snapshot.setTransactions`` -> ``computedState``), not from the version's checksum
file. Every commit makes a new snapshot, so every tagged write pays a state reconstruction:
Spark jobs over the log, whatever the size of the write.

This times ``--writes`` appends of ``--rows`` rows to one table, untagged and then tagged
(alternating, after a warm-up), and counts the Spark jobs of each. Prints one
``BENCH_RESULT`` line: median seconds and jobs per write of each kind.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time

from peers.common import finish, session

from medallion.config import TableRef
from medallion.declarations import APPEND_ONLY
from medallion.streams.sinks import append_batch
from medallion.tables import create_delta_table


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=3_000, help="rows per append")
    parser.add_argument("--writes", type=int, default=30, help="appends of each kind")
    parser.add_argument("--workdir", default=None, help="where the table goes (a temp folder)")
    args = parser.parse_args()
    spark = session()
    context = spark.sparkContext
    folder = tempfile.mkdtemp(prefix="medallion-tagged-writes-", dir=args.workdir)
    table = TableRef("bronze", "events", f"{folder}/table", "medallion.tagged_writes")
    create_delta_table(spark, table, "id BIGINT, value STRING", dict(APPEND_ONLY))
    rows = spark.range(args.rows).selectExpr("id", "CAST(id AS STRING) AS value").persist()
    rows.count()
    seconds: dict[str, list[float]] = {"untagged": [], "tagged": []}
    jobs: dict[str, list[int]] = {"untagged": [], "tagged": []}
    for n in range(-3, args.writes):  # three warm-up pairs first
        for kind in ("untagged", "tagged"):
            group = f"{kind}-{n}"
            context.setJobGroup(group, group)
            started = time.monotonic()
            append_batch(rows, table, txn=("bench", n + 3) if kind == "tagged" else None)
            if n >= 0:
                seconds[kind].append(time.monotonic() - started)
                jobs[kind].append(len(context.statusTracker().getJobIdsForGroup(group)))
    result = {
        "rows_per_write": args.rows,
        "writes": args.writes,
        **{f"{kind}_median_s": round(statistics.median(seconds[kind]), 3) for kind in seconds},
        **{f"{kind}_jobs_per_write": statistics.median(jobs[kind]) for kind in jobs},
    }
    result["tagged_extra_s"] = round(result["tagged_median_s"] - result["untagged_median_s"], 3)
    shutil.rmtree(folder, ignore_errors=True)
    finish(result)


if __name__ == "__main__":
    main()
