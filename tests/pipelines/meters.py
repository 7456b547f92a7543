"""A pipeline declared outside medallion's package, as a team would declare its own: meter
readings, bronze, then each meter's latest reading in gold. Loaded through
``$MEDALLION_PIPELINES=meters`` (with this folder on ``PYTHONPATH``)."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from medallion.config import Config
from medallion.contracts import FieldRule
from medallion.declarations import (
    APPEND_ONLY,
    INGEST_METADATA,
    KAFKA_METADATA,
    Flow,
    Landing,
    Maintenance,
    Pipeline,
    Table,
)
from medallion.pipelines import register
from medallion.streams.exactly_once import MergingBatches
from medallion.streams.sinks import Trigger, start_append, start_delta_foreach_batch
from medallion.streams.sources import input_lines
from medallion.transforms.bronze import to_bronze

FIELDS = (
    FieldRule("meter_id", "string", True),
    FieldRule("reading", "integer", True),
    FieldRule("read_at", "timestamp", True),
)
READINGS = Table(
    "bronze",
    "meter_readings",
    f"meter_id STRING, reading STRING, read_at STRING, {INGEST_METADATA}, {KAFKA_METADATA}",
    APPEND_ONLY,
    # Kept whole, as an audit trail: maintenance compacts it but never vacuums it.
    maintenance=Maintenance(vacuum=False),
)
LATEST = Table(
    "gold",
    "meter_latest",
    "meter_id STRING NOT NULL, reading BIGINT NOT NULL, read_at TIMESTAMP NOT NULL",
    clustered_by=("meter_id",),  # liquid clustering: OPTIMIZE clusters it
)


def start_readings(
    spark: SparkSession, config: Config, flow: Flow, trigger: Trigger
) -> StreamingQuery:
    """A start function of its own (the engine's ``start_bronze_append`` does the same): its
    name, dataset and table come from its declaration, ``flow``."""
    lines = input_lines(spark, config, flow.source.dataset)
    (table,) = flow.outputs
    name = flow.name
    return start_append(
        to_bronze(lines, FIELDS), config.table(table.key), config.checkpoint(name), trigger, name
    )


def newest_per_meter(batch: DataFrame) -> DataFrame:
    """Each meter's newest valid reading of the batch."""
    rows = batch.where(
        "meter_id IS NOT NULL AND reading RLIKE '^-?[0-9]+$' AND read_at IS NOT NULL"
    ).select(
        "meter_id",
        F.col("reading").cast("bigint").alias("reading"),
        F.to_timestamp("read_at").alias("read_at"),
    )
    newest = Window.partitionBy("meter_id").orderBy(F.desc("read_at"), F.desc("reading"))
    return rows.withColumn("_n", F.row_number().over(newest)).where("_n = 1").drop("_n")


# Merged over an older reading only.
latest_batch = MergingBatches(
    newest_per_meter,
    ("meter_id",),
    "WHEN MATCHED AND s.read_at > t.read_at THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
)


def start_latest(
    spark: SparkSession, config: Config, flow: Flow, trigger: Trigger
) -> StreamingQuery:
    return start_delta_foreach_batch(spark, config, flow, trigger, latest_batch)


METERS = register(
    Pipeline(
        "meters",
        (READINGS, LATEST),
        (
            Flow(
                "bronze_meter_readings",
                "bronze",
                Landing("meter_readings"),
                (READINGS,),
                start_readings,
            ),
            Flow("gold_meter_latest", "gold", READINGS, (LATEST,), start_latest),
        ),
    )
)
