"""The at-purchase revenue stream's pure steps (pipelines/retail/counted_purchases.py), in
batch: which counted purchases a batch's customer changes may move, and what a ledger commit's
change feed adds to gold."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

from medallion.pipelines.retail.counted_purchases import (
    purchases_moved_by,
    revenue_increments,
    revenue_inputs,
)

EVENTS = (
    "event_id string, event_type string, user_id string, event_timestamp timestamp, "
    "event_date date, revenue decimal(18,4)"
)
FEED = "customer_id string, _changes array<struct<updated_at: timestamp>>"
LEDGER_FEED = (
    "event_id string, event_date date, country string, revenue decimal(18,4), _change_type string"
)


def _event(user: str, day: int, kind: str = "purchase") -> tuple:
    return (f"{user}-{day}", kind, user, datetime(2026, 11, day, 12), date(2026, 11, day), 1)


def _events(spark, rows: list[tuple]):
    return spark.createDataFrame([(*r[:5], Decimal(r[5])) for r in rows], EVENTS)


def test_a_change_moves_its_customers_purchases_from_its_earliest_change_on(spark):
    counted = _events(
        spark, [_event("c1", d) for d in (1, 3, 5)] + [_event("c2", 2), _event("c3", 4)]
    )
    feed = spark.createDataFrame(
        [
            # c1's changed row holds changes of the 4th and the 2nd: purchases from the 2nd on.
            ("c1", [(datetime(2026, 11, 4),), (datetime(2026, 11, 2),)]),
            ("c2", [(None,)]),  # a change without a time: every purchase of c2
        ],
        FEED,
    )
    batch = _events(spark, [_event("c9", 6), _event("c9", 7, kind="view")])
    inputs = revenue_inputs(batch, feed)
    purchases = inputs.where("purchase").select("event_id", "user_id", "revenue").collect()
    assert [tuple(r) for r in purchases] == [("c9-6", "c9", Decimal("1.0000"))]
    moved = purchases_moved_by(inputs.where("NOT purchase"), counted)
    assert sorted(r.event_id for r in moved.collect()) == ["c1-3", "c1-5", "c2-2"]


def test_a_ledger_commit_adds_what_it_counts_and_takes_away_what_moved(spark):
    d1, d2 = date(2026, 11, 1), date(2026, 11, 2)
    feed = spark.createDataFrame(
        [
            ("e1", d1, "DE", Decimal(10), "insert"),
            ("e2", d1, "DE", Decimal(5), "insert"),
            ("e3", d2, "FR", Decimal(7), "update_preimage"),  # e3 moves from FR to DE
            ("e3", d2, "DE", Decimal(7), "update_postimage"),
            ("e4", d2, "FR", Decimal(1), "delete"),
        ],
        LEDGER_FEED,
    )
    got = {
        (r.event_date, r.country): (r.revenue, r.purchases)
        for r in revenue_increments(feed).collect()
    }
    assert got == {
        (d1, "DE"): (Decimal("15.0000"), 2),
        (d2, "FR"): (Decimal("-8.0000"), -2),
        (d2, "DE"): (Decimal("7.0000"), 1),
    }
