"""Peer "batch_ceiling": the ingestion ceiling, one Spark batch job writing bronze.

Reads every landed JSON line at once and writes the bronze Delta table exactly as medallion's
bronze stream would (same line reading, same ``to_bronze``), with no streaming machinery: no
checkpoint, no micro-batches, no silver or gold. It bounds how fast bronze can possibly go.

    .venv/bin/python benchmarks/peers/batch_ceiling.py --landing DIR --workdir DIR

``DIR`` of ``--landing`` holds ``events/*.json`` (from ``medallion generate``); the workdir is
wiped first and receives ``bronze/events``. The last stdout line is ``BENCH_RESULT {json}``.
"""

from __future__ import annotations

import os
import time

from common import finish, fresh_workdir, parse_args, session
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from medallion.pipelines.retail.contract import EVENT_FIELDS
from medallion.streams.checkpoint_files import landed_files
from medallion.streams.run_size import jvm_options_for
from medallion.transforms.bronze import to_bronze


def write_bronze(spark: SparkSession, landing: str, table: str) -> None:
    """Read the landed lines like medallion's file source and append them to bronze."""
    lines = (
        spark.read.option("lineSep", "\n")
        .text(f"{landing}/events")
        .select(
            "value",
            F.col("_metadata.file_path").alias("_source_file"),
            F.current_timestamp().alias("_ingested_at"),
        )
    )
    to_bronze(lines, EVENT_FIELDS).write.format("delta").mode("append").save(table)


def _landed_bytes(landing: str) -> int:
    return sum(os.path.getsize(p) for p in landed_files(os.path.join(landing, "events")))


def main() -> None:
    args = parse_args(__doc__)
    workdir = fresh_workdir(args.workdir)
    table = f"{workdir}/bronze/events"

    started = time.monotonic()
    # The options medallion's run would choose for as many bytes: small deliveries compare
    # like with like (a new lake's run reads every landed file).
    spark = session(java=jvm_options_for(_landed_bytes(args.landing)))
    session_s = time.monotonic() - started

    started = time.monotonic()
    write_bronze(spark, args.landing, table)
    wall_s = time.monotonic() - started

    finish(
        {
            "peer": "batch_ceiling",
            "session_s": round(session_s, 2),
            "wall_s": round(wall_s, 2),
            "layers_s": {"bronze": round(wall_s, 2)},
            "bronze_rows": spark.read.format("delta").load(table).count(),
        }
    )


if __name__ == "__main__":
    main()
