"""Gold: hourly product metrics, kept exact by adding each batch of new silver rows."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from medallion.json_columns import MONEY_SUM_TYPE

HOURLY_KEYS = ("window_start", "product_id")
# One row of gold/hourly_product_users: a user counted in an hour's unique_users.
USER_KEY_COLUMNS = (*HOURLY_KEYS, "user_id")
METRIC_COLUMNS = ("views", "add_to_carts", "purchases", "revenue", "unique_users")


def with_hour_window(events: DataFrame) -> DataFrame:
    """Events plus ``window_start``, the UTC hour their ``event_timestamp`` falls in."""
    return events.withColumn("window_start", F.date_trunc("hour", "event_timestamp"))


def hourly_user_keys(events: DataFrame) -> DataFrame:
    """The distinct (``window_start``, ``product_id``, ``user_id``) of events, with the
    ``event_date`` of the hour (the rows of ``gold/hourly_product_users``)."""
    return with_hour_window(events).select(*USER_KEY_COLUMNS, "event_date").distinct()


def _with_window_end(metrics: DataFrame) -> DataFrame:
    return metrics.withColumn(
        "window_end", F.col("window_start") + F.expr("INTERVAL 1 HOUR")
    ).select(*HOURLY_KEYS, "window_end", *METRIC_COLUMNS)


def _counts(events: DataFrame) -> list:
    is_type = lambda t: F.col("event_type") == t  # noqa: E731
    return [
        F.count(F.when(is_type("view"), 1)).alias("views"),
        F.count(F.when(is_type("add_to_cart"), 1)).alias("add_to_carts"),
        F.count(F.when(is_type("purchase"), 1)).alias("purchases"),
        F.coalesce(F.sum(F.when(is_type("purchase"), F.col("revenue"))), F.lit(0))
        .cast(MONEY_SUM_TYPE)
        .alias("revenue"),
    ]


def hourly_product_metrics(events: DataFrame) -> DataFrame:
    """One row per (hour, product): counts by type, purchase revenue and distinct users."""
    return _with_window_end(
        with_hour_window(events)
        .groupBy(*HOURLY_KEYS)
        .agg(*_counts(events), F.count_distinct("user_id").alias("unique_users"))
    )


def hourly_increments(events: DataFrame, new_user_keys: DataFrame) -> DataFrame:
    """What ``events`` add to gold, one row per (hour, product): their counts and revenue, and
    as ``unique_users`` the number of ``new_user_keys`` (the hour's users not counted before).

    Added to gold's row (or inserted as it), this keeps gold equal to
    :func:`hourly_product_metrics` over every event so far, however old the hour.
    """
    counts = with_hour_window(events).groupBy(*HOURLY_KEYS).agg(*_counts(events))
    new_users = new_user_keys.groupBy(*HOURLY_KEYS).agg(F.count("*").alias("unique_users"))
    added = counts.join(new_users, list(HOURLY_KEYS), "left").fillna(0, ["unique_users"])
    return _with_window_end(added)
