"""Customer change records (transforms/change_records.py): validate them, and enrich purchases."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from medallion.json_columns import MONEY_SUM_TYPE
from medallion.pipelines.blocks import validator
from medallion.pipelines.retail.contract import CUSTOMER_CHANGES
from medallion.transforms.change_records import ChangeRecords
from medallion.transforms.history import History, latest_change_at

CUSTOMERS = ChangeRecords("customer_id", ("name", "email", "country", "segment"))
UNKNOWN_COUNTRY = "unknown"


# Bronze customer rows plus ``reason`` (NULL when valid), the rules each broke and the typed
# change columns; ``expectations`` say which broken rules let a change pass (default: none).
validate_changes = validator(CUSTOMER_CHANGES)


def enrich_purchases(purchases: DataFrame, customers: DataFrame) -> DataFrame:
    """Purchases with their customer's ``country``; ``unknown`` when there is no live customer."""
    countries = customers.select(
        F.col("customer_id").alias("_customer_id"), F.col("country").alias("_country")
    )
    return (
        purchases.join(countries, F.col("user_id") == F.col("_customer_id"), "left")
        .withColumn("country", F.coalesce(F.col("_country"), F.lit(UNKNOWN_COUNTRY)))
        .drop("_customer_id", "_country")
    )


def enrich_purchases_at_purchase(purchases: DataFrame, changes: DataFrame) -> DataFrame:
    """Purchases with the ``country`` their customer had at the purchase's ``event_timestamp``:
    that of the greatest of the customer's ``changes`` (change records) with ``updated_at`` at
    or before it, in silver's order; ``unknown`` when there is none, or it is a DELETE."""
    rows = purchases.withColumn(CUSTOMERS.key, F.col("user_id"))
    known = latest_change_at(History(CUSTOMERS), changes, rows, "event_timestamp", ("country",))
    return known.withColumn("country", F.coalesce(F.col("country"), F.lit(UNKNOWN_COUNTRY))).drop(
        CUSTOMERS.key
    )


def daily_revenue_by_country(enriched_purchases: DataFrame) -> DataFrame:
    """Revenue and purchase counts per (``event_date``, ``country``)."""
    return enriched_purchases.groupBy("event_date", "country").agg(
        F.sum("revenue").cast(MONEY_SUM_TYPE).alias("revenue"),
        F.count(F.lit(1)).alias("purchases"),
    )
