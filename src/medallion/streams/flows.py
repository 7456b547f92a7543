"""The named streams of the pipeline, what each reads and writes, and their order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from medallion.config import Config
from medallion.faults import pause_point
from medallion.ops.schema import check_table_schema
from medallion.streams import customers
from medallion.streams.sinks import (
    Trigger,
    append_batch,
    idempotent_writes,
    merge_insert_new,
    merge_upsert,
    start_append,
    start_delta_foreach_batch,
    transaction_app_id,
)
from medallion.streams.sources import input_lines
from medallion.tables import read_table
from medallion.transforms.bronze import to_bronze
from medallion.transforms.gold import (
    HOURLY_KEYS,
    affected_hours,
    hourly_product_metrics,
    with_hour_window,
)
from medallion.transforms.silver import (
    deduplicate_events,
    quarantined_events,
    valid_events,
    validate_events,
)


@dataclass(frozen=True)
class Flow:
    """One named stream: its query name (also its checkpoint folder), layer, input and outputs."""

    name: str
    layer: str
    reads: str
    writes: tuple[str, ...]
    start: Callable[[SparkSession, Config, Trigger], StreamingQuery]


def _start_bronze_events(spark: SparkSession, config: Config, trigger: Trigger) -> StreamingQuery:
    lines = input_lines(spark, config, "events")  # landing files or the events topic
    return start_append(
        to_bronze(lines),
        config.table("bronze/events"),
        config.checkpoint("bronze_events"),
        trigger,
        "bronze_events",
    )


def silver_events_batch(config: Config, checkpoint: str) -> Callable[[DataFrame, int], None]:
    """The foreachBatch function of ``silver_events``: quarantine the invalid, MERGE the new valid.

    Both writes carry ``txnAppId``/``txnVersion``, and the MERGE only inserts unseen
    ``event_id``s, so replaying a batch after a crash changes nothing.
    """
    silver = config.table("silver/events")
    quarantine = config.table("silver/events_quarantine")

    extra = config.extra_event_columns

    app_id = transaction_app_id("silver_events", checkpoint)

    def process(batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        # A renamed or retyped silver column stops the stream here, before any write.
        schema = check_table_schema(spark, silver, "silver_events", checkpoint, extra)
        validated = validate_events(batch, extra)
        # Only quarantined rows keep their raw line, so the cached batch is a fraction the size.
        invalid = F.col("reason").isNotNull()
        validated = validated.withColumn("_raw", F.when(invalid, F.col("_raw"))).persist()
        try:
            invalid_count = validated.where(invalid).count()
            with idempotent_writes(spark, app_id(spark), batch_id):
                if invalid_count:
                    append_batch(quarantined_events(validated), quarantine)
                    pause_point("silver_events:quarantined")  # crash tests only
                merge_insert_new(
                    spark,
                    silver,
                    deduplicate_events(valid_events(validated, extra)),
                    ["event_id"],
                    schema_evolution=bool(extra or schema.unexpected),
                )
        finally:
            validated.unpersist()

    return process


def _start_silver_events(spark: SparkSession, config: Config, trigger: Trigger) -> StreamingQuery:
    return start_delta_foreach_batch(
        spark, config, trigger, "silver_events", "bronze/events", silver_events_batch
    )


def gold_hourly_batch(config: Config, checkpoint: str) -> Callable[[DataFrame, int], None]:
    """The foreachBatch function of ``gold_hourly_product_metrics``.

    The hours and products a batch touches are recomputed from all of silver and MERGEd into
    gold, so a late event of any age lands in its window and a replay rewrites the same values.
    """
    silver = config.table("silver/events")
    gold = config.table("gold/hourly_product_metrics")

    app_id = transaction_app_id("gold_hourly_product_metrics", checkpoint)

    def process(batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        keys = affected_hours(batch).persist()
        try:
            dates = [row.event_date for row in keys.select("event_date").distinct().collect()]
            if not dates:
                return
            touched = (
                with_hour_window(read_table(spark, silver).where(F.col("event_date").isin(dates)))
                .join(F.broadcast(keys.select(*HOURLY_KEYS)), list(HOURLY_KEYS), "left_semi")
                .drop("window_start")
            )
            with idempotent_writes(spark, app_id(spark), batch_id):
                merge_upsert(spark, gold, hourly_product_metrics(touched), HOURLY_KEYS)
        finally:
            keys.unpersist()

    return process


def _start_gold_hourly(spark: SparkSession, config: Config, trigger: Trigger) -> StreamingQuery:
    return start_delta_foreach_batch(
        spark, config, trigger, "gold_hourly_product_metrics", "silver/events", gold_hourly_batch
    )


CUSTOMER_FLOWS: tuple[Flow, ...] = (
    Flow(
        "bronze_customers",
        "bronze",
        "landing/customers",
        ("bronze/customers",),
        customers.start_bronze_customers,
    ),
    Flow(
        "silver_customers",
        "silver",
        "bronze/customers",
        ("silver/customers", "silver/customer_tombstones", "silver/customers_quarantine"),
        customers.start_silver_customers,
    ),
    Flow(
        "gold_customer_changes",
        "gold",
        "silver/customers (change data feed)",
        ("gold/customer_changes",),
        customers.start_gold_customer_changes,
    ),
    Flow(
        "gold_daily_revenue_by_country",
        "gold",
        "silver/events + silver/customers",
        ("gold/daily_revenue_by_country",),
        customers.start_gold_revenue,
    ),
)

FLOWS: tuple[Flow, ...] = (
    Flow("bronze_events", "bronze", "landing/events", ("bronze/events",), _start_bronze_events),
    Flow(
        "silver_events",
        "silver",
        "bronze/events",
        ("silver/events", "silver/events_quarantine"),
        _start_silver_events,
    ),
    Flow(
        "gold_hourly_product_metrics",
        "gold",
        "silver/events",
        ("gold/hourly_product_metrics",),
        _start_gold_hourly,
    ),
    *CUSTOMER_FLOWS,
)

LAYERS = ("bronze", "silver", "gold")


def flows_by_layer(flows: tuple[Flow, ...] = FLOWS) -> list[tuple[str, list[Flow]]]:
    """The flows grouped by layer, upstream layers first."""
    return [(layer, [f for f in flows if f.layer == layer]) for layer in LAYERS]


def flow(name: str) -> Flow:
    """The flow with this query name."""
    for candidate in FLOWS:
        if candidate.name == name:
            return candidate
    raise KeyError(f"unknown stream {name!r}; known: {', '.join(f.name for f in FLOWS)}")
