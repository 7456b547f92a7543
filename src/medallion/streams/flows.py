"""The named streams of the pipeline, what each reads and writes, and their order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from medallion.config import Config
from medallion.conflicts import retry_on_conflict
from medallion.faults import pause_point
from medallion.ops.schema import check_table_schema
from medallion.streams import customers
from medallion.streams.sinks import (
    Trigger,
    append_batch,
    append_new_rows,
    idempotent_writes,
    merge_into,
    rows_not_in,
    start_append,
    start_delta_foreach_batch,
    transaction_app_id,
)
from medallion.streams.sources import input_lines
from medallion.streams.upgrade import backfill_hourly_users
from medallion.transforms.bronze import to_bronze
from medallion.transforms.gold import (
    HOURLY_KEYS,
    METRIC_COLUMNS,
    USER_KEY_COLUMNS,
    hourly_increments,
    hourly_user_keys,
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
    """The foreachBatch function of ``silver_events``: quarantine the invalid, append the valid
    events whose ``event_id`` silver does not hold yet (an insert-only MERGE, done as a
    broadcast anti-join: see :func:`~medallion.streams.sinks.append_new_rows`).

    Both writes carry ``txnAppId``/``txnVersion``, and only unseen ``event_id``s are added, so
    replaying a batch after a crash changes nothing.
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
            counts = validated.agg(F.count("*"), F.count(F.when(invalid, 1))).first()
            rows, invalid_count = counts[0], counts[1]
            with idempotent_writes(spark, app_id(spark), batch_id):
                if invalid_count:
                    append_batch(quarantined_events(validated), quarantine)
                    pause_point("silver_events:quarantined")  # crash tests only
                if rows > invalid_count:
                    append_new_rows(
                        spark,
                        silver,
                        deduplicate_events(valid_events(validated, extra)),
                        "event_id",
                        rows - invalid_count,
                        merge_schema=bool(extra or schema.unexpected),
                    )
        finally:
            validated.unpersist()

    return process


def _start_silver_events(spark: SparkSession, config: Config, trigger: Trigger) -> StreamingQuery:
    return start_delta_foreach_batch(
        spark, config, trigger, "silver_events", "bronze/events", silver_events_batch
    )


# Gold's row plus the batch's increments: silver only ever inserts, so every metric adds up.
_ADD_METRICS = (
    "WHEN MATCHED THEN UPDATE SET "
    + ", ".join(f"t.`{c}` = t.`{c}` + s.`{c}`" for c in METRIC_COLUMNS)
    + " WHEN NOT MATCHED THEN INSERT *"
)
_EVENT_COLUMNS = ("event_type", "user_id", "product_id", "revenue", "event_timestamp", "event_date")


def gold_hourly_batch(config: Config, checkpoint: str) -> Callable[[DataFrame, int], None]:
    """The foreachBatch function of ``gold_hourly_product_metrics``: add the batch to gold.

    A batch holds the rows silver inserted since the last one (silver never updates or deletes
    a row). Their counts and revenue are added to their (hour, product) rows, whatever the
    hour's age. ``unique_users`` grows by the batch's (hour, product, user) keys that
    ``gold/hourly_product_users`` does not hold yet, which are then appended there: the cost of
    a batch follows its own size and the dates it touches, not the history.

    Both writes carry ``txnAppId``/``txnVersion``, so a replayed batch adds nothing twice. The
    keys are appended after gold's MERGE: a crash between the two replays the batch against the
    same keys, and the MERGE, already committed, is skipped.
    """
    gold = config.table("gold/hourly_product_metrics")
    users = config.table("gold/hourly_product_users")

    app_id = transaction_app_id("gold_hourly_product_metrics", checkpoint)

    def process(batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        cached: list[DataFrame] = []

        def cache(df: DataFrame) -> DataFrame:
            cached.append(df.persist())
            return cached[-1]

        try:
            events = cache(batch.select(*_EVENT_COLUMNS))
            keys = cache(hourly_user_keys(events))
            per_date = keys.groupBy("event_date").count().collect()
            if not per_date:
                return
            # The keys gold has not counted yet: the users table is read for the batch's dates.
            dates = F.col("event_date").isin([row.event_date for row in per_date])
            total = sum(row["count"] for row in per_date)
            new_keys = cache(rows_not_in(spark, users, keys, USER_KEY_COLUMNS, total, dates))
            with idempotent_writes(spark, app_id(spark), batch_id):
                merge_into(
                    spark, gold, hourly_increments(events, new_keys), HOURLY_KEYS, _ADD_METRICS
                )
                pause_point("gold_hourly:metrics_merged")  # crash tests only
                retry_on_conflict(lambda: append_batch(new_keys, users), f"append to {users.key}")
        finally:
            for df in cached:
                df.unpersist()

    return process


def _start_gold_hourly(spark: SparkSession, config: Config, trigger: Trigger) -> StreamingQuery:
    backfill_hourly_users(spark, config)
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
        ("gold/hourly_product_metrics", "gold/hourly_product_users"),
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
