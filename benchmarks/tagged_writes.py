"""What an exactly-once write costs: appends untagged, with txnAppId/txnVersion, and tagged
with their batch as medallion writes them (streams/exactly_once.py).

    .venv/bin/python benchmarks/tagged_writes.py [--rows 3000] [--writes 30] [--workdir DIR]

Delta's way of making a replayed batch write nothing twice is (``txnAppId``, ``txnVersion``)
on every write. Delta checks the pair against the table's recorded transactions
(``OptimisticTransaction.txnVersion``), which Delta 4.4 reads from the snapshot's reconstructed
state (``Snapshot.setTransactions`` -> ``computedState``), not from the version's checksum
file. Every commit makes a new snapshot, so every tagged write pays a state reconstruction:
Spark jobs over the log, whatever the size of the write.

medallion tags each write with its batch in the commit's ``userMetadata`` instead, and only a
batch that may be a replay (a query's first) reads the log's newest commits to look for its
tag, as JSON, without a Spark job. This times ``--writes`` appends of ``--rows`` rows to one
table of each kind in turn (after a warm-up): ``untagged``, ``tagged`` (Delta's pair),
``batch_tag`` (medallion, a batch after a completed one) and ``batch_tag_replay`` (medallion, a
possible replay that reads the log first), and counts the Spark jobs of each. Prints one
``BENCH_RESULT`` line: median seconds and jobs per write of each kind.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time

from peers.common import finish, session

from medallion.declarations import APPEND_ONLY
from medallion.sql_names import TableRef
from medallion.streams.exactly_once import BatchWrites
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
    kinds = ("untagged", "tagged", "batch_tag", "batch_tag_replay")
    seconds: dict[str, list[float]] = {kind: [] for kind in kinds}
    jobs: dict[str, list[int]] = {kind: [] for kind in kinds}
    for n in range(-3, args.writes):  # three warm-up rounds first
        for kind in kinds:
            group = f"{kind}-{n}"
            context.setJobGroup(group, group)
            started = time.monotonic()
            if kind.startswith("batch_tag"):
                writes = BatchWrites(spark, n + 3, replay=kind == "batch_tag_replay")
                assert writes.append(rows, table, f"bench:{kind}")
            else:
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
    for kind in kinds[1:]:
        extra = result[f"{kind}_median_s"] - result["untagged_median_s"]
        result[f"{kind}_extra_s"] = round(extra, 3)
    shutil.rmtree(folder, ignore_errors=True)
    finish(result)


if __name__ == "__main__":
    main()
