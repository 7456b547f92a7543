"""The IoT pipeline's pure transformations: DataFrame in, DataFrame out, testable in batch."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from medallion.pipelines.iot.contract import READING_COLUMNS
from medallion.transforms.bronze import arrival_order

KEY = ("device_id", "reading_timestamp")
SILVER_COLUMNS = (*READING_COLUMNS, "_ingested_at", "_source_file")
QUARANTINE_COLUMNS = ("device_id", "reason", "_raw", "_source_file", "_ingested_at")
_METRICS = ("temperature", "humidity")


def first_arrivals(validated: DataFrame) -> DataFrame:
    """The valid readings, one per (device, timestamp): the first to arrive."""
    valid = validated.where(F.col("reason").isNull())
    first = Window.partitionBy(*KEY).orderBy(*arrival_order(valid))
    ranked = valid.withColumn("_arrival", F.row_number().over(first))
    return ranked.where("_arrival = 1").select(*SILVER_COLUMNS)


def quarantined_readings(validated: DataFrame) -> DataFrame:
    """The refused readings, with their reason and raw line."""
    return validated.where(F.col("reason").isNotNull()).select(*QUARANTINE_COLUMNS)


def latest_per_device(readings: DataFrame) -> DataFrame:
    """Each device's newest reading among ``readings`` (one per (device, timestamp))."""
    newest = Window.partitionBy("device_id").orderBy(F.desc("reading_timestamp"))
    ranked = readings.withColumn("_newest", F.row_number().over(newest))
    return ranked.where("_newest = 1").select(*READING_COLUMNS)


def minute_increments(readings: DataFrame) -> DataFrame:
    """Per (device, minute): how many readings, and each metric's least, greatest and exact
    sum, with the average those give; what a MERGE adds to the minute's row."""
    minute = F.date_trunc("minute", "reading_timestamp").alias("minute_start")
    aggregates = [F.count("*").alias("readings")]
    for metric in _METRICS:
        aggregates += [
            F.min(metric).alias(f"{metric}_min"),
            F.max(metric).alias(f"{metric}_max"),
            F.sum(metric).cast("decimal(28,4)").alias(f"{metric}_sum"),
        ]
    grouped = readings.groupBy("device_id", minute).agg(*aggregates)
    averages = [
        (F.col(f"{m}_sum").cast("double") / F.col("readings")).alias(f"{m}_avg") for m in _METRICS
    ]
    return grouped.select("*", *averages)


def add_minutes_clauses() -> str:
    """The MERGE clauses that add :func:`minute_increments` to the minutes' rows."""
    updates = ["t.readings = t.readings + s.readings"]
    for m in _METRICS:
        updates += [
            f"t.{m}_min = least(t.{m}_min, s.{m}_min)",
            f"t.{m}_max = greatest(t.{m}_max, s.{m}_max)",
            f"t.{m}_sum = t.{m}_sum + s.{m}_sum",
            f"t.{m}_avg = CAST(t.{m}_sum + s.{m}_sum AS DOUBLE) / (t.readings + s.readings)",
        ]
    return f"WHEN MATCHED THEN UPDATE SET {', '.join(updates)} WHEN NOT MATCHED THEN INSERT *"
