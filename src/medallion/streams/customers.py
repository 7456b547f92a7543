"""The customer change-data streams: bronze, sequence-aware MERGE, CDF audit, enriched revenue."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from medallion.config import Config
from medallion.contracts import CUSTOMER_FIELDS
from medallion.faults import pause_point
from medallion.streams.sinks import (
    Trigger,
    append_batch,
    idempotent_writes,
    merge_into,
    start_append,
    start_delta_foreach_batch,
    transaction_app_id,
)
from medallion.streams.sources import delta_stream, input_lines
from medallion.tables import read_table
from medallion.transforms.bronze import to_bronze
from medallion.transforms.customers import (
    STATE_COLUMNS,
    change_order_sql,
    daily_revenue_by_country,
    enrich_purchases,
    latest_change_per_customer,
    newer_than_tombstones,
    quarantined_changes,
    valid_changes,
    validate_changes,
)

# A change applies only when it is newer than what the table holds for that customer.
_NEWER = f"{change_order_sql('s')} > {change_order_sql('t')}"
_APPLY_CHANGES = f"""
    WHEN MATCHED AND {_NEWER} AND s.operation = 'DELETE' THEN DELETE
    WHEN MATCHED AND {_NEWER} THEN UPDATE SET {{updates}}
    WHEN NOT MATCHED AND s.operation <> 'DELETE' THEN INSERT ({{columns}}) VALUES ({{values}})
"""
_TOMBSTONE_NEWER = "named_struct('seq', s.sequence_num, 'at', s.updated_at) > named_struct('seq', t.sequence_num, 'at', t.updated_at)"
_RECORD_TOMBSTONES = f"""
    WHEN MATCHED AND {_TOMBSTONE_NEWER} THEN UPDATE SET *
    WHEN NOT MATCHED THEN INSERT *
"""
_ADD_REVENUE = """
    WHEN MATCHED THEN UPDATE SET t.revenue = t.revenue + s.revenue,
                                 t.purchases = t.purchases + s.purchases
    WHEN NOT MATCHED THEN INSERT *
"""
_SILVER_COLUMNS = (*STATE_COLUMNS, "operation", "_ingested_at", "_source_file")
CDF_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


def _apply_changes_clauses() -> str:
    columns = ", ".join(f"`{c}`" for c in _SILVER_COLUMNS)
    return _APPLY_CHANGES.format(
        updates=", ".join(f"t.`{c}` = s.`{c}`" for c in _SILVER_COLUMNS),
        columns=columns,
        values=", ".join(f"s.`{c}`" for c in _SILVER_COLUMNS),
    )


def start_bronze_customers(spark: SparkSession, config: Config, trigger: Trigger) -> StreamingQuery:
    lines = input_lines(spark, config, "customers")
    return start_append(
        to_bronze(lines, CUSTOMER_FIELDS),
        config.table("bronze/customers"),
        config.checkpoint("bronze_customers"),
        trigger,
        "bronze_customers",
    )


def silver_customers_batch(config: Config, checkpoint: str) -> Callable[[DataFrame, int], None]:
    """The foreachBatch function of ``silver_customers``.

    Invalid changes go to quarantine. Valid ones are reduced to each customer's newest change,
    changes not newer than a recorded DELETE are dropped, and one MERGE applies the rest:
    newer UPDATE/INSERT rows replace older ones, a newer DELETE removes the row (a ``delete``
    in the Change Data Feed), older changes change nothing. Each customer's newest DELETE is
    kept in ``silver/customer_tombstones`` (whether or not a newer change followed it in the
    batch) so that an older change arriving later cannot bring the customer back; a newer
    INSERT can. All writes carry ``txnAppId``/``txnVersion``.
    """
    customers = config.table("silver/customers")
    tombstones = config.table("silver/customer_tombstones")
    quarantine = config.table("silver/customers_quarantine")

    app_id = transaction_app_id("silver_customers", checkpoint)

    def process(batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        validated = validate_changes(batch).persist()
        try:
            invalid_count = validated.where(F.col("reason").isNotNull()).count()
            changes = valid_changes(validated)
            newest = latest_change_per_customer(changes)
            # Both MERGEs below read the tombstones as they were before this batch: the
            # customers MERGE runs first, and the tombstones MERGE only adds newer DELETEs.
            live = newer_than_tombstones(newest, read_table(spark, tombstones))
            # Each customer's newest DELETE of the batch, even one a newer change overrides:
            # the tombstones then hold every customer's newest DELETE ever seen, whatever the
            # batch boundaries.
            deletes = latest_change_per_customer(changes.where("operation = 'DELETE'")).select(
                "customer_id", "sequence_num", "updated_at", "_ingested_at"
            )
            with idempotent_writes(spark, app_id(spark), batch_id):
                if invalid_count:
                    append_batch(quarantined_changes(validated), quarantine)
                merge_into(
                    spark,
                    customers,
                    live.select(*_SILVER_COLUMNS),
                    ["customer_id"],
                    _apply_changes_clauses(),
                )
                pause_point("silver_customers:customers_merged")  # crash tests only
                merge_into(spark, tombstones, deletes, ["customer_id"], _RECORD_TOMBSTONES)
        finally:
            validated.unpersist()

    return process


def start_silver_customers(spark: SparkSession, config: Config, trigger: Trigger) -> StreamingQuery:
    return start_delta_foreach_batch(
        spark, config, trigger, "silver_customers", "bronze/customers", silver_customers_batch
    )


def start_gold_customer_changes(
    spark: SparkSession, config: Config, trigger: Trigger
) -> StreamingQuery:
    changes = delta_stream(
        spark,
        config.table("silver/customers"),
        config.source_options("gold_customer_changes"),
        change_feed=True,
    )
    return start_append(
        changes.select(*_SILVER_COLUMNS, *CDF_COLUMNS),
        config.table("gold/customer_changes"),
        config.checkpoint("gold_customer_changes"),
        trigger,
        "gold_customer_changes",
    )


def gold_revenue_batch(config: Config, checkpoint: str) -> Callable[[DataFrame, int], None]:
    """The foreachBatch function of ``gold_daily_revenue_by_country``.

    Each purchase of the batch is joined with ``silver/customers`` as it is now (a
    stream-static join), counted under its customer's country or ``unknown``, and the
    batch's totals are added to gold by a MERGE that carries ``txnAppId``/``txnVersion``:
    a replayed batch is skipped, so no purchase is counted twice.
    """
    customers = config.table("silver/customers")
    gold = config.table("gold/daily_revenue_by_country")

    app_id = transaction_app_id("gold_daily_revenue_by_country", checkpoint)

    def process(batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        purchases = batch.where(F.col("event_type") == "purchase").persist()
        try:
            if purchases.isEmpty():
                return
            totals = daily_revenue_by_country(
                enrich_purchases(purchases, read_table(spark, customers))
            )
            with idempotent_writes(spark, app_id(spark), batch_id):
                merge_into(spark, gold, totals, ["event_date", "country"], _ADD_REVENUE)
        finally:
            purchases.unpersist()

    return process


def start_gold_revenue(spark: SparkSession, config: Config, trigger: Trigger) -> StreamingQuery:
    return start_delta_foreach_batch(
        spark, config, trigger, "gold_daily_revenue_by_country", "silver/events", gold_revenue_batch
    )
