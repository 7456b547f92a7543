"""medallion's bronze -> silver -> gold as Spark Declarative Pipelines definitions.

Loaded by ``spark-pipelines run`` (see ``../spark-pipeline.yml``); ``spark`` is the Spark Connect
session the CLI injects into this module. The transformations are medallion's own pure
functions (bronze: to_bronze; silver: validate_events, valid_events and medallion's
first-arrival rule per ``event_id``; gold: hourly_product_metrics), so over the same landing
folder the tables hold the same rows as medallion's, and gold is identical.

bronze is a streaming table (text file source); silver and gold are materialized views, each a
batch over all of its input. Silver cannot be a streaming table with a dedup in Spark 4.2: see
``silver_events``.

The landing folder comes from the spec's ``configuration`` (``spark.medallion.sdp.landing``).
"""

from pyspark import pipelines as dp
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from medallion.pipelines.retail.contract import EVENT_FIELDS
from medallion.pipelines.retail.transforms.gold import hourly_product_metrics
from medallion.pipelines.retail.transforms.silver import (
    CONTENT_ORDER_COLUMNS,
    SILVER_EVENT_COLUMNS,
    valid_events,
    validate_events,
)
from medallion.transforms.bronze import to_bronze

LANDING = spark.conf.get("spark.medallion.sdp.landing")  # noqa: F821 (injected by spark-pipelines)
BRONZE = "bronze_events"
SILVER = "silver_events"
GOLD = "gold_hourly_product_metrics"


def _bronze() -> DataFrame:
    # medallion.streams.sources.landing_lines with the text file source.
    lines = (
        spark.readStream.format("text")  # noqa: F821
        .option("lineSep", "\n")
        .load(f"{LANDING.rstrip('/')}/events")
        .select(
            "value",
            F.col("_metadata.file_path").alias("_source_file"),
            F.current_timestamp().alias("_ingested_at"),
        )
    )
    return to_bronze(lines, EVENT_FIELDS)


# Built here, not in the query function: to_bronze asks for ``lines.columns`` (a schema
# analysis), which SDP forbids inside query functions (ATTEMPT_ANALYSIS_IN_PIPELINE_QUERY_FUNCTION)
# but allows while the definitions load. The plan is the same; only where it is built differs.
BRONZE_PLAN = _bronze()


@dp.table(name=BRONZE, format="delta", comment="Every landed line, parsed (medallion bronze).")
def bronze_events() -> DataFrame:
    return BRONZE_PLAN


def first_per_event_id(events: DataFrame) -> DataFrame:
    """medallion.pipelines.retail.transforms.silver.deduplicate_events, ending in a select instead of a drop.

    Spark Connect's planner analyzes a Drop's (and a Deduplicate's) input as soon as the flow is
    registered, before any pipeline table exists, which fails with TABLE_OR_VIEW_NOT_FOUND; a
    select is planned lazily. Same window, same order, same row kept.
    """
    first = Window.partitionBy("event_id").orderBy(
        "_ingested_at", "_source_file", *CONTENT_ORDER_COLUMNS
    )
    ranked = events.withColumn("_rank", F.row_number().over(first)).where("_rank = 1")
    return ranked.select(*SILVER_EVENT_COLUMNS)


@dp.materialized_view(name=SILVER, format="delta", comment="Valid events, one per event_id.")
def silver_events() -> DataFrame:
    # A materialized view over all of bronze, not a streaming table with
    # dropDuplicates(["event_id"]): in Spark 4.2 that fails when the flow is registered (see
    # first_per_event_id), and AUTO CDC, the other keyed streaming option, needs a MERGE-capable
    # DSv2 target (AUTOCDC_TARGET_DOES_NOT_SUPPORT_MERGE for Delta).
    bronze = spark.read.table(BRONZE)  # noqa: F821
    # Lines from files: no Kafka columns (a pipeline's query function may not inspect a schema).
    return first_per_event_id(valid_events(validate_events(bronze, kafka=()), kafka=()))


@dp.materialized_view(name=GOLD, format="delta", comment="Hourly product metrics (medallion gold).")
def gold_hourly_product_metrics() -> DataFrame:
    # A full recompute over all of silver: exact, unique_users included.
    return hourly_product_metrics(spark.read.table(SILVER))  # noqa: F821
