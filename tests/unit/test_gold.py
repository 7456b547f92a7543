"""Hourly product metrics as a pure aggregation."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from medallion.pipelines.retail.transforms.gold import (
    HOURLY_KEYS,
    METRIC_COLUMNS,
    USER_KEY_COLUMNS,
    hourly_increments,
    hourly_product_metrics,
    hourly_user_keys,
)

SCHEMA = "event_id string, event_type string, user_id string, product_id string, revenue decimal(18,4), event_timestamp timestamp, event_date date"


def test_hourly_metrics_count_types_sum_purchase_revenue_and_distinct_users(spark):
    t = dt.datetime(2026, 11, 20, 13, 5)
    d = t.date()
    events = spark.createDataFrame(
        [
            ("1", "view", "u1", "p1", None, t, d),
            (
                "2",
                "view",
                "u1",
                "p1",
                Decimal("3"),
                t,
                d,
            ),  # a view's revenue is not purchase revenue
            ("3", "add_to_cart", "u2", "p1", None, t.replace(minute=59, second=59), d),
            ("4", "purchase", "u2", "p1", Decimal("10.25"), t, d),
            ("5", "purchase", "u3", "p1", Decimal("0.7500"), t, d),
            ("6", "view", "u1", "p1", None, t.replace(hour=14), d),
            ("7", "view", "u9", "p2", None, t, d),
        ],
        SCHEMA,
    )
    h13, h14 = dt.datetime(2026, 11, 20, 13), dt.datetime(2026, 11, 20, 14)
    expected = spark.createDataFrame(
        [
            (h13, "p1", h14, 2, 1, 2, Decimal("11.0000"), 3),
            (h14, "p1", h14 + dt.timedelta(hours=1), 1, 0, 0, Decimal("0"), 1),
            (h13, "p2", h14, 1, 0, 0, Decimal("0"), 1),
        ],
        "window_start timestamp, product_id string, window_end timestamp, views long, add_to_carts long, "
        "purchases long, revenue decimal(28,4), unique_users long",
    )
    assertDataFrameEqual(hourly_product_metrics(events), expected)
    assert hourly_user_keys(events).count() == 5


def _add(gold: DataFrame, increments: DataFrame) -> DataFrame:
    """Gold plus increments, as the gold stream's MERGE adds them (keys outer-joined)."""
    joined = gold.alias("t").join(increments.alias("s"), list(HOURLY_KEYS), "full")
    return joined.select(
        *HOURLY_KEYS,
        F.coalesce("t.window_end", "s.window_end").alias("window_end"),
        *[
            (F.coalesce(f"t.{c}", F.lit(0)) + F.coalesce(f"s.{c}", F.lit(0)))
            .cast(gold.schema[c].dataType)  # as the MERGE stores it: the column's type
            .alias(c)
            for c in METRIC_COLUMNS
        ],
    )


def test_increments_added_batch_by_batch_equal_the_metrics_of_all_events(spark):
    """Late events of an old hour, a user seen again, a new user in an old hour: adding each
    batch's increments (new users only) gives exactly the metrics recomputed over everything."""
    t = dt.datetime(2026, 11, 20, 13, 5)
    old = dt.datetime(2026, 10, 1, 8, 30)
    rows = [
        ("1", "view", "u1", "p1", None, t, t.date()),
        ("2", "purchase", "u2", "p1", Decimal("10.25"), t, t.date()),
        ("3", "view", "u1", "p2", None, old, old.date()),
    ]
    later = [
        ("4", "view", "u1", "p1", None, t, t.date()),  # u1 already counted in (13h, p1)
        ("5", "purchase", "u3", "p2", Decimal("1.5"), old, old.date()),  # a new user, old hour
        ("6", "add_to_cart", "u1", "p3", None, t, t.date()),  # a new (hour, product)
    ]
    first = spark.createDataFrame(rows, SCHEMA)
    second = spark.createDataFrame(later, SCHEMA)
    gold = hourly_product_metrics(first)
    known = hourly_user_keys(first)
    new_keys = hourly_user_keys(second).join(known, list(USER_KEY_COLUMNS), "left_anti")
    assert new_keys.count() == 2
    added = _add(gold, hourly_increments(second, new_keys))
    assertDataFrameEqual(added, hourly_product_metrics(first.unionByName(second)))
