"""Gold: hourly product metrics, recomputed exactly for the windows a batch touches."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from medallion.contracts import REVENUE_SUM_TYPE

HOURLY_KEYS = ("window_start", "product_id")


def with_hour_window(events: DataFrame) -> DataFrame:
    """Events plus ``window_start``, the UTC hour their ``event_timestamp`` falls in."""
    return events.withColumn("window_start", F.date_trunc("hour", "event_timestamp"))


def affected_hours(events: DataFrame) -> DataFrame:
    """The distinct (``window_start``, ``product_id``, ``event_date``) keys a set of events touches."""
    return with_hour_window(events).select(*HOURLY_KEYS, "event_date").distinct()


def hourly_product_metrics(events: DataFrame) -> DataFrame:
    """One row per (hour, product): counts by type, purchase revenue and distinct users."""
    is_type = lambda t: F.col("event_type") == t  # noqa: E731
    return (
        with_hour_window(events)
        .groupBy(*HOURLY_KEYS)
        .agg(
            F.count(F.when(is_type("view"), 1)).alias("views"),
            F.count(F.when(is_type("add_to_cart"), 1)).alias("add_to_carts"),
            F.count(F.when(is_type("purchase"), 1)).alias("purchases"),
            F.coalesce(F.sum(F.when(is_type("purchase"), F.col("revenue"))), F.lit(0))
            .cast(REVENUE_SUM_TYPE)
            .alias("revenue"),
            F.count_distinct("user_id").alias("unique_users"),
        )
        .withColumn("window_end", F.col("window_start") + F.expr("INTERVAL 1 HOUR"))
        .select(
            *HOURLY_KEYS,
            "window_end",
            "views",
            "add_to_carts",
            "purchases",
            "revenue",
            "unique_users",
        )
    )
