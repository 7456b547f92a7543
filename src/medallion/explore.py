"""Looking at the lake from a notebook: history, time travel, change data, stream progress, plots.

Everything here reads through SQL or DataFrame reads, so it works on a cluster, over Spark
Connect and locally alike (notebooks/explore.ipynb).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import reduce

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.config import Config
from medallion.declarations import Table
from medallion.deployment import flows_of, tables_of
from medallion.ops.quarantine import quarantine_tables
from medallion.ops.status import backlog_count
from medallion.sql_names import TableRef
from medallion.streams.progress import read_progress
from medallion.tables import history as table_history
from medallion.tables import read_table, table_exists, table_properties

CDF_PROPERTY = "delta.enableChangeDataFeed"


def history(spark: SparkSession, table: TableRef, limit: int = 20) -> DataFrame:
    """The table's latest commits: version, time, operation and its metrics."""
    columns = ("version", "timestamp", "operation", "operationParameters", "operationMetrics")
    return table_history(spark, table, limit).select(*columns)


def as_of(spark: SparkSession, table: TableRef, version: int) -> DataFrame:
    """The table as it was at ``version`` (time travel, ``VERSION AS OF``)."""
    return spark.sql(f"SELECT * FROM {table.sql_name} VERSION AS OF {int(version)}")


def rows_by_version(
    spark: SparkSession, table: TableRef, versions: Sequence[int] | None = None
) -> DataFrame:
    """How many rows the table held at each version (by default its last five)."""
    if versions is None:
        versions = sorted(r.version for r in table_history(spark, table, 5).collect())
    counts = [
        as_of(spark, table, v)
        .agg(F.count(F.lit(1)).alias("rows"))
        .select(F.lit(v).alias("version"), "rows")
        for v in versions
    ]
    return reduce(DataFrame.unionAll, counts)


def change_feed_enabled(spark: SparkSession, table: TableRef) -> bool:
    """True when the table records its Change Data Feed."""
    return str(table_properties(spark, table).get(CDF_PROPERTY, "false")).lower() == "true"


def change_feed_tables(spark: SparkSession, config: Config) -> list[TableRef]:
    """The tables of the lake that exist and record their Change Data Feed."""
    return [
        t for t in tables_of(config) if table_exists(spark, t) and change_feed_enabled(spark, t)
    ]


def change_feed_start(spark: SparkSession, table: TableRef) -> int:
    """The first version the Change Data Feed can be read from: where it was last turned on."""
    start = 0
    rows = table_history(spark, table).select("version", "operationParameters").collect()
    for row in sorted(rows, key=lambda r: r.version):
        properties = json.loads((row.operationParameters or {}).get("properties") or "{}")
        if str(properties.get(CDF_PROPERTY, "")).lower() == "true":
            start = row.version
    return start


def change_feed(
    spark: SparkSession, table: TableRef, starting_version: int | None = None
) -> DataFrame:
    """The table's Change Data Feed from ``starting_version`` (by default, all of it): one row
    per change with ``_change_type``, ``_commit_version`` and ``_commit_timestamp``."""
    if starting_version is None:
        starting_version = change_feed_start(spark, table)
    reader = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", str(int(starting_version)))
    )
    return reader.load(table.path) if table.path is not None else reader.table(table.qualified_name)


def change_feed_table(spark: SparkSession, config: Config, key: str = "") -> TableRef | None:
    """The table ``key`` (for example ``silver/customers``), or when ``key`` is empty the first
    table of the lake that records its Change Data Feed; None when there is none."""
    if key:
        return config.table(key)
    tables = change_feed_tables(spark, config)
    return tables[0] if tables else None


def change_counts(spark: SparkSession, table: TableRef) -> DataFrame:
    """How many changes of each type every commit of the Change Data Feed holds."""
    return (
        change_feed(spark, table)
        .groupBy("_commit_version", "_change_type")
        .count()
        .orderBy("_commit_version", "_change_type")
    )


CDF_HINT = (
    "No table of this lake records its Change Data Feed yet. Turn it on for a table with\n"
    "  ALTER TABLE <table> SET TBLPROPERTIES (delta.enableChangeDataFeed = true)\n"
    "and its changes from the next commit on can be read here."
)


def stream_progress(spark: SparkSession, config: Config) -> DataFrame | None:
    """Where each stream stands, read from its checkpoint: batches committed, the last batch
    and when it committed, and the source offset it reached. None when no stream ran yet."""
    frames = []
    for flow in flows_of(config):
        checkpoint = config.checkpoint(flow.name)
        try:
            commits = spark.read.format("text").load(f"{checkpoint}/commits")
            offsets = spark.read.format("text").load(f"{checkpoint}/offsets")
        except AnalysisException:  # no checkpoint: the stream never ran
            continue
        batch = F.col("_metadata.file_name").cast("long")
        committed = commits.select(
            batch.alias("batch_id"), F.col("_metadata.file_modification_time").alias("at")
        ).agg(
            F.countDistinct("batch_id").alias("batches"),
            F.max("batch_id").alias("last_batch_id"),
            F.max("at").alias("last_commit_at"),
        )
        # An offsets file: a version line, the batch metadata, then one line per source.
        latest = (
            offsets.select(batch.alias("batch_id"), "value")
            .where(~F.col("value").startswith("v") & ~F.col("value").contains("batchWatermarkMs"))
            .groupBy("batch_id")
            .agg(F.last("value").alias("source_offset"))
        )
        frames.append(
            committed.join(latest, committed.last_batch_id == latest.batch_id, "left").select(
                F.lit(flow.name).alias("stream"),
                F.lit(flow.layer).alias("layer"),
                "batches",
                "last_batch_id",
                "last_commit_at",
                "source_offset",
            )
        )
    return reduce(DataFrame.unionByName, frames) if frames else None


def stream_health(spark: SparkSession, config: Config) -> DataFrame | None:
    """Each executed batch of each stream, from the progress table: when, rows in, rows per
    second processed, and the batch's duration in seconds (None before any was recorded)."""
    progress = read_progress(spark, config)
    if progress is None:
        return None
    executed = progress.where(F.col("duration_ms").getItem("addBatch").isNotNull())
    return executed.select(
        F.col("query_name").alias("stream"),
        "batch_id",
        "timestamp",
        F.col("num_input_rows").alias("rows"),
        F.col("processed_rows_per_second").alias("rows_per_second"),
        (F.col("duration_ms").getItem("triggerExecution") / 1000).alias("batch_seconds"),
    ).orderBy("timestamp", "stream")


def quarantine_reasons(spark: SparkSession, config: Config) -> DataFrame | None:
    """How many records each quarantine holds by reason (the reason's text up to its first
    colon, so values quoted after it do not split a reason); None without a quarantine."""
    frames = [
        read_table(spark, table).select(
            F.lit(table.key).alias("quarantine"),
            F.split(F.col("reason"), ":").getItem(0).alias("reason"),
        )
        for table in quarantine_tables(spark, config)
    ]
    if not frames:
        return None
    union = reduce(DataFrame.unionByName, frames)
    return union.groupBy("quarantine", "reason").count().orderBy(F.desc("count"), "reason")


def stream_backlog(spark: SparkSession, config: Config) -> list[tuple[str, int, str]]:
    """What each started stream has not read yet, now: ``(stream, count, "file" or
    "version")``, from its checkpoint (Kafka streams report theirs in their progress)."""
    found = ((flow.name, backlog_count(spark, config, flow)) for flow in flows_of(config))
    return [(name, *count) for name, count in found if count is not None]


def plot_stream_health(spark: SparkSession, config: Config):
    """Rows per second and batch seconds of every stream over time, and each stream's
    backlog now (matplotlib), or None before any batch was recorded."""
    # deferred: loads matplotlib, numpy
    import matplotlib.pyplot as plt

    health = stream_health(spark, config)
    if health is None:
        return None
    frame = health.toPandas()
    figure, (rate, duration, behind) = plt.subplots(
        3, 1, figsize=(10, 9), gridspec_kw={"height_ratios": [2, 2, 1.5]}
    )
    for stream, rows in frame.groupby("stream"):
        rate.plot(rows["timestamp"], rows["rows_per_second"], marker=".", label=stream)
        duration.plot(rows["timestamp"], rows["batch_seconds"], marker=".", label=stream)
    rate.set_ylabel("rows/s processed")
    duration.set_ylabel("batch seconds")
    rate.legend(fontsize="small", ncol=2)
    backlog = stream_backlog(spark, config)
    behind.barh([f"{name} ({unit}s)" for name, _, unit in backlog], [n for _, n, _ in backlog])
    behind.set_xlabel("backlog now: landed files or source versions not read yet")
    figure.suptitle("Stream health")
    figure.tight_layout()
    return figure


def plot_quarantine_reasons(spark: SparkSession, config: Config):
    """A horizontal bar per quarantine reason (matplotlib), or None without a quarantine."""
    # deferred: loads matplotlib, numpy
    import matplotlib.pyplot as plt

    reasons = quarantine_reasons(spark, config)
    if reasons is None:
        return None
    frame = reasons.toPandas()
    labels = [
        f"{q.split('/')[-1]}: {r}"
        for q, r in zip(frame["quarantine"], frame["reason"], strict=True)
    ]
    figure, axis = plt.subplots(figsize=(10, max(2, 0.3 * len(frame))))
    axis.barh(labels[::-1], frame["count"][::-1])
    axis.set_xlabel("records quarantined")
    figure.suptitle("Quarantine reasons")
    figure.tight_layout()
    return figure


def display_order(table: Table, columns: Sequence[str]) -> list[str]:
    """The columns to sort a table's rows by for people: its first time column (a date, a
    timestamp, a window), then its Z-order keys (what readers filter and join on), then its
    first column; those of ``columns`` only.

    >>> display_order(Table("gold", "t", "product_id STRING, window_start TIMESTAMP, n INT",
    ...     zorder=("product_id",)), ["product_id", "window_start", "n"])
    ['window_start', 'product_id']
    """
    timely = [name for name, kind in table.column_types if kind.startswith(("timestamp", "date"))]
    order = [*timely[:1], *table.zorder, *table.columns[:1]]
    return [c for c in dict.fromkeys(order) if c in columns]
