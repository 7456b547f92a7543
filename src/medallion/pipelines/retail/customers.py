"""The customer change-data streams: bronze, sequence-aware MERGE, CDF audit, enriched revenue."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from medallion.config import Config
from medallion.erasure_log import erased_versions
from medallion.pipelines.retail.contract import CUSTOMER_CHANGES, CUSTOMER_FIELDS
from medallion.pipelines.retail.transforms.customers import (
    CUSTOMERS,
    daily_revenue_by_country,
    enrich_purchases,
    validate_changes,
)
from medallion.streams.apply_changes import apply_changes_batches
from medallion.streams.apply_history import KeptHistory
from medallion.streams.exactly_once import ReplayGuard
from medallion.streams.sinks import Trigger, start_append, transaction_app_id
from medallion.streams.sources import delta_stream, input_lines
from medallion.tables import read_table
from medallion.transforms.bronze import to_bronze

_ADD_REVENUE = """
    WHEN MATCHED THEN UPDATE SET t.revenue = t.revenue + s.revenue,
                                 t.purchases = t.purchases + s.purchases
    WHEN NOT MATCHED THEN INSERT *
"""
CDF_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


def start_bronze_customers(spark: SparkSession, config: Config, trigger: Trigger) -> StreamingQuery:
    lines = input_lines(spark, config, "customers")
    return start_append(
        to_bronze(lines, CUSTOMER_FIELDS),
        config.table("bronze/customers"),
        config.checkpoint("bronze_customers"),
        trigger,
        "bronze_customers",
    )


# Every version of every customer, and the setting that names the columns it tracks.
KEPT_HISTORY = KeptHistory("silver/customers_history", "bronze/customers", "track_history_columns")

# The foreachBatch function of ``silver_customers``: customer changes applied by a
# sequence-aware MERGE, deletes included (streams/apply_changes.py), and every version of every
# customer kept in silver/customers_history (streams/apply_history.py).
silver_customers_batch = apply_changes_batches(
    "silver_customers",
    CUSTOMERS,
    CUSTOMER_CHANGES,
    validate_changes,
    "silver/customers",
    "silver/customer_tombstones",
    "silver/customers_quarantine",
    KEPT_HISTORY,
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
    erased = erased_versions(spark, config, "silver/customers")
    if erased:  # an erasure's DELETE is no change to audit (medallion/erasure_log.py)
        changes = changes.where(~F.col("_commit_version").isin(erased))
    return start_append(
        changes.select(*CUSTOMERS.change_columns, *CDF_COLUMNS),
        config.table("gold/customer_changes"),
        config.checkpoint("gold_customer_changes"),
        trigger,
        "gold_customer_changes",
    )


def revenue_of(spark: SparkSession, config: Config, events: DataFrame) -> DataFrame:
    """Gold's revenue rows of ``events``' purchases, each under its customer's country as
    ``silver/customers`` knows it now (an erasure's recompute: medallion/subjects.py)."""
    purchases = events.where(F.col("event_type") == "purchase")
    customers = read_table(spark, config.table("silver/customers"))
    return daily_revenue_by_country(enrich_purchases(purchases, customers))


def gold_revenue_batch(
    config: Config, checkpoint: str, stream: str | None = None
) -> Callable[[DataFrame, int], None]:
    """The foreachBatch function of ``gold_daily_revenue_by_country``.

    Each purchase of the batch is joined with ``silver/customers`` as it is now (a
    stream-static join), counted under its customer's country or ``unknown``, and the
    batch's totals are added to gold by a MERGE that happens once per batch
    (streams/exactly_once.py): a replayed batch is skipped, so no purchase is counted twice.
    """
    gold = config.table("gold/daily_revenue_by_country")

    app_id = transaction_app_id(stream or "gold_daily_revenue_by_country", checkpoint)
    guard = ReplayGuard(checkpoint)

    def process(batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        purchases = batch.where(F.col("event_type") == "purchase").persist()
        try:
            if purchases.isEmpty():
                return
            totals = revenue_of(spark, config, purchases)
            with guard.batch(spark, batch_id) as writes:
                writes.merge(gold, totals, ["event_date", "country"], _ADD_REVENUE, app_id(spark))
        finally:
            purchases.unpersist()

    return process
