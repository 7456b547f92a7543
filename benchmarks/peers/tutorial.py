"""Peer "tutorial": a hand-written bronze -> silver -> gold pipeline, tutorial style.

Three plain append streams chained through Delta tables, as public Delta Lake Structured
Streaming tutorials build them: each has its own checkpoint and runs once with
``trigger(availableNow=True)``, one after the other. No validation beyond null checks, no
quarantine, deduplication without a watermark, and an approximate distinct count in gold.

    .venv/bin/python benchmarks/peers/tutorial.py --landing DIR --workdir DIR [--stream [LAYERS]]

``DIR`` of ``--landing`` holds ``events/*.json`` (from ``medallion generate``); the workdir
(tables and checkpoints) is wiped first. The last stdout line is ``BENCH_RESULT {json}``.

With ``--stream`` the three streams run at once with processing-time triggers of 0.5 s (the
interval ``medallion run --stream`` looks for input at) until SIGTERM: the streaming latency
part measures this pipeline beside medallion's (benchmarks/streaming.py). ``--stream bronze``
runs the first stream alone: what landing a file in one Delta table costs on the machine.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

from common import finish, fresh_workdir, gold_totals, parse_args, session
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, StringType, StructField, StructType, TimestampType

EVENT_SCHEMA = StructType(
    [
        StructField("event_id", StringType()),
        StructField("event_type", StringType()),
        StructField("user_id", StringType()),
        StructField("product_id", StringType()),
        StructField("category", StringType()),
        StructField("revenue", DoubleType()),
        StructField("event_timestamp", TimestampType()),
    ]
)
EVENT_TYPES = ["view", "add_to_cart", "purchase"]


STREAM_INTERVAL = "0.5 seconds"


def run_stream(stream: DataFrame, table: str, checkpoint: str, mode: str = "append") -> float:
    """Write ``stream`` to the Delta table ``table`` once (available now); return wall seconds."""
    started = time.monotonic()
    query = (
        stream.writeStream.format("delta")
        .outputMode(mode)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start(table)
    )
    query.awaitTermination()
    return time.monotonic() - started


def bronze(spark: SparkSession, landing: str) -> DataFrame:
    """The landed JSON lines parsed with the declared schema, plus ingestion metadata."""
    return (
        spark.readStream.schema(EVENT_SCHEMA)
        .json(f"{landing}/events")
        .withColumn("_ingested_at", F.current_timestamp())
        .withColumn("_source_file", F.col("_metadata.file_path"))
    )


def silver(spark: SparkSession, bronze_table: str) -> DataFrame:
    """Bronze rows with all required fields and a known event type, one per event_id."""
    required = ["event_id", "event_type", "user_id", "product_id", "event_timestamp"]
    events = spark.readStream.format("delta").load(bronze_table)
    for name in required:
        events = events.where(F.col(name).isNotNull())
    return (
        events.where(F.col("event_type").isin(EVENT_TYPES))
        # No watermark, as tutorials often do: the dedup state keeps every event_id forever.
        .dropDuplicates(["event_id"])
        .withColumn("event_date", F.to_date("event_timestamp"))
    )


def gold(spark: SparkSession, silver_table: str) -> DataFrame:
    """Hourly product metrics over all silver rows (written in complete mode)."""
    events = spark.readStream.format("delta").load(silver_table)
    is_type = lambda t: F.col("event_type") == t  # noqa: E731
    return events.groupBy(F.window("event_timestamp", "1 hour"), "product_id").agg(
        F.count(F.when(is_type("view"), 1)).alias("views"),
        F.count(F.when(is_type("add_to_cart"), 1)).alias("add_to_carts"),
        F.count(F.when(is_type("purchase"), 1)).alias("purchases"),
        F.sum(F.when(is_type("purchase"), F.col("revenue"))).alias("revenue"),
        # A streaming aggregation cannot do an exact count distinct (Spark rejects it), so
        # tutorials use the HyperLogLog++ estimate instead.
        F.approx_count_distinct("user_id").alias("unique_users"),
    )


def stream_until_stopped(
    spark: SparkSession, landing: str, tables: dict, checkpoints: dict, layers: str
) -> None:
    """The streams of ``layers`` (``bronze,silver,gold``, or a prefix) at once, each every
    0.5 s, until SIGTERM or SIGINT. A stream reading a Delta table starts once that table has
    its first commit."""
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    readers = {
        "bronze": lambda: bronze(spark, landing),
        "silver": lambda: silver(spark, tables["bronze"]),
    }
    readers["gold"] = lambda: gold(spark, tables["silver"])
    queries = []
    chain = (("bronze", None), ("silver", "bronze"), ("gold", "silver"))
    for layer, upstream in chain[: len(layers.split(","))]:
        while upstream and not (Path(tables[upstream]) / "_delta_log").is_dir():
            if stop.wait(0.2):
                break
        if stop.is_set():
            break
        queries.append(
            readers[layer]()
            .writeStream.format("delta")
            .outputMode("complete" if layer == "gold" else "append")
            .option("checkpointLocation", checkpoints[layer])
            .trigger(processingTime=STREAM_INTERVAL)
            .start(tables[layer])
        )
    while not stop.wait(0.5):
        if any(q.exception() is not None for q in queries):
            break
    for query in queries:
        query.stop()


def main() -> None:
    args = parse_args(__doc__, can_stream=True)
    workdir = fresh_workdir(args.workdir)
    tables = {layer: f"{workdir}/{layer}/events" for layer in ("bronze", "silver", "gold")}
    checkpoints = {layer: f"{workdir}/_checkpoints/{layer}" for layer in tables}
    if args.stream:
        stream_until_stopped(session(), args.landing, tables, checkpoints, args.stream)
        finish({"peer": "tutorial", "streamed": True})

    started = time.monotonic()
    spark = session()
    session_s = time.monotonic() - started

    started = time.monotonic()
    layers_s = {
        "bronze": run_stream(bronze(spark, args.landing), tables["bronze"], checkpoints["bronze"]),
        "silver": run_stream(
            silver(spark, tables["bronze"]), tables["silver"], checkpoints["silver"]
        ),
        "gold": run_stream(
            gold(spark, tables["silver"]), tables["gold"], checkpoints["gold"], mode="complete"
        ),
    }
    wall_s = time.monotonic() - started

    finish(
        {
            "peer": "tutorial",
            "session_s": round(session_s, 2),
            "wall_s": round(wall_s, 2),
            "layers_s": {layer: round(seconds, 2) for layer, seconds in layers_s.items()},
            "bronze_rows": spark.read.format("delta").load(tables["bronze"]).count(),
            "silver_rows": spark.read.format("delta").load(tables["silver"]).count(),
            "gold": gold_totals(tables["gold"]),
        }
    )


if __name__ == "__main__":
    main()
