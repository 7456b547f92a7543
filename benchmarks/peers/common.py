"""Helpers shared by the peer pipelines: arguments, the Spark session, gold totals, the result line."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from decimal import Decimal
from pathlib import Path
from typing import NoReturn

from deltalake import DeltaTable
from pyspark.sql import SparkSession

from medallion.session import local_builder

METRIC_COLUMNS = ("views", "add_to_carts", "purchases", "unique_users")
# The line every benchmark child prints last, and benchmarks/measure.py looks for.
RESULT_PREFIX = "BENCH_RESULT "


def parse_args(
    description: str | None = None, can_continue: bool = False, can_stream: bool = False
) -> argparse.Namespace:
    """``--landing DIR`` (holds ``events/*.json``) and ``--workdir DIR`` (tables, checkpoints);
    with ``can_continue``, ``--continue`` too (``continue_lake``: keep what the work dir holds);
    with ``can_stream``, ``--stream`` (stream until stopped)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--landing", required=True, help="folder with events/*.json")
    parser.add_argument("--workdir", required=True, help="tables and checkpoints (wiped first)")
    if can_continue:
        parser.add_argument(
            "--continue",
            dest="continue_lake",
            action="store_true",
            help="continue the tables and checkpoints already in --workdir instead of wiping it",
        )
    if can_stream:
        parser.add_argument(
            "--stream",
            nargs="?",
            const="bronze,silver,gold",
            metavar="LAYERS",
            help="stream the layers (default: all three) every 0.5 s until SIGTERM",
        )
    return parser.parse_args()


def fresh_workdir(path: str) -> str:
    """Delete ``path`` if it exists and create it empty; return its absolute path."""
    workdir = Path(path).resolve()
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    return str(workdir)


def session(java: str = "") -> SparkSession:
    """A local delta-spark session built exactly like medallion's (2 cores, log level WARN),
    with ``java``'s JVM options too (a small run's: medallion/streams/run_size.py)."""
    spark = local_builder("peer", master="local[2]", java=java).getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def gold_totals(path: str) -> dict:
    """Sum the metric columns of a gold Delta table, read with ``deltalake`` (no JVM).

    ``revenue`` is an exact decimal string. medallion's revenue is a decimal column; the
    tutorial's is a double, whose values are summed exactly as Decimals and then rounded to 4
    places so the two are comparable.
    """
    table = DeltaTable(path).to_pyarrow_table()
    totals: dict = {"rows": table.num_rows}
    for name in METRIC_COLUMNS:
        totals[name] = int(sum(v for v in table.column(name).to_pylist() if v is not None))
    revenue = sum(
        (Decimal(str(v)) for v in table.column("revenue").to_pylist() if v is not None),
        Decimal(0),
    )
    totals["revenue"] = str(revenue.quantize(Decimal("0.0001")))
    return totals


def finish(result: dict) -> NoReturn:
    """Print the one final stdout line the benchmark harness reads, ``BENCH_RESULT {json}``,
    and end the process at once.

    Python's teardown is skipped: after a read with ``deltalake`` its native threads sometimes
    abort it ("terminate called without an active exception", exit 134) once the result is
    out. The JVM of a local session exits with this process.
    """
    print(RESULT_PREFIX + json.dumps(result, sort_keys=True, default=str), flush=True)
    sys.stderr.flush()
    os._exit(0)
