"""Which days a batch of the at-purchase revenue stream recomputes (pipelines/retail/revenue.py),
in batch: the days of its purchases, and those of its changed customers' purchases made at or
after their earliest change."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

from medallion.pipelines.retail.revenue import changed_days, days_predicate, revenue_inputs

EVENTS = "event_type string, user_id string, event_timestamp timestamp, event_date date, revenue decimal(18,4)"
FEED = "customer_id string, _changes array<struct<updated_at: timestamp>>"


def _purchase(user: str, day: int, kind: str = "purchase") -> tuple:
    return (kind, user, datetime(2026, 11, day, 12), date(2026, 11, day), Decimal(1))


def test_a_change_touches_its_customers_purchase_days_from_its_earliest_change_on(spark):
    silver = spark.createDataFrame(
        [_purchase("c1", d) for d in (1, 3, 5)] + [_purchase("c2", 2), _purchase("c3", 4)],
        EVENTS,
    )
    feed = spark.createDataFrame(
        [
            # c1's changed row holds changes of the 4th and the 2nd: days from the 2nd on.
            ("c1", [(datetime(2026, 11, 4),), (datetime(2026, 11, 2),)]),
            ("c2", [(None,)]),  # a change without a time: every purchase of c2
        ],
        FEED,
    )
    batch = spark.createDataFrame([_purchase("c9", 6), _purchase("c9", 7, kind="view")], EVENTS)
    inputs = revenue_inputs(batch, feed)
    assert sorted(inputs.where("purchase").select("event_date").collect()) == [(date(2026, 11, 6),)]
    days = {r.event_date.day for r in changed_days(silver, inputs).collect()}
    assert days == {2, 3, 5}


def test_the_days_predicate_lists_sql_dates():
    assert days_predicate([date(2026, 1, 2)]) == "event_date IN (DATE'2026-01-02')"
