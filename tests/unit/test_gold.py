"""Hourly product metrics as a pure aggregation."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from pyspark.testing import assertDataFrameEqual

from medallion.transforms.gold import affected_hours, hourly_product_metrics

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
    assert affected_hours(events).count() == 3
