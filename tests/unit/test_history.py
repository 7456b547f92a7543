"""Customer history (SCD type 2) and the change in force at a time, against the plain-Python
oracle (tests/history_oracle.py): the same rows whatever the order and batching in which the
changes arrive (issue 30)."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from history_oracle import (
    CONTENT,
    FIELDS,
    ORDERS,
    SCHEMA,
    START,
    arriving,
    change_at,
    expected_in_order,
    generated_changes,
    in_batches,
    rows_in_order,
)
from pyspark.sql import functions as F

from medallion.pipelines.retail.transforms.customers import CUSTOMERS
from medallion.transforms.history import VERSION_ID, History, latest_change_at, valid_at

TRACKED = ("country", "segment")


@pytest.mark.parametrize("tracked", [None, TRACKED], ids=["every column", "country and segment"])
def test_versions_of_all_changes_at_once_equal_the_oracle(spark, tracked):
    changes = generated_changes(seed=1)
    got = History(CUSTOMERS, tracked).versions(spark.createDataFrame(changes, SCHEMA))
    assert list(got.columns) == list(History(CUSTOMERS, tracked).columns)
    assert got.select("customer_id", VERSION_ID).distinct().count() == got.count()
    assert rows_in_order(got) == expected_in_order(changes, tracked or CONTENT)
    # The cases the data must hold for this to mean something.
    rows = expected_in_order(changes, tracked or CONTENT)
    assert any(r["operation"] == "DELETE" and r["valid_from"] == r["valid_to"] for r in rows)
    assert any(r["operation"] == "DELETE" and r["valid_from"] != r["valid_to"] for r in rows)
    assert any(len(r["_changes"]) > 1 and r["_changes"][-1]["operation"] != "DELETE" for r in rows)


@pytest.mark.slow  # three orders of three batches; test_history_merge.py does it by MERGE
@pytest.mark.parametrize("order", ORDERS)
def test_batches_in_any_arrival_order_give_the_history_of_all_changes_at_once(spark, order):
    """Each batch recomputes the keys it touches from their rows' absorbed changes: a late,
    older change inserts a version in the middle and closes its neighbours again, and copies
    change nothing."""
    changes = generated_changes(seed=2)
    scd = History(CUSTOMERS, TRACKED)
    table = spark.createDataFrame([], scd.versions(spark.createDataFrame([], SCHEMA)).schema)
    for batch in in_batches(arriving(changes, order, seed=3)):
        new = spark.createDataFrame(batch, SCHEMA)
        replaced = scd.recompute_keys(table, new)
        kept = table.join(new.select("customer_id").distinct(), "customer_id", "left_anti")
        table = spark.createDataFrame(kept.union(replaced).collect(), table.schema)
    assert rows_in_order(table) == expected_in_order(changes, TRACKED)


def _purchases(seed: int) -> list[tuple]:
    rng = random.Random(seed)
    return [
        (f"e{i}", f"c{rng.randrange(7)}", START + timedelta(hours=rng.randrange(-10, 220)))
        for i in range(120)
    ]


def test_the_change_in_force_at_each_purchase(spark):
    """Among a customer's changes with ``updated_at`` at or before the purchase, the greatest in
    silver's order; none, or a DELETE, gives NULL (gold's ``unknown``)."""
    changes = generated_changes(seed=4)
    purchases = _purchases(seed=5)
    events = spark.createDataFrame(purchases, "event_id string, customer_id string, at timestamp")
    frame = spark.createDataFrame(changes, SCHEMA)
    got = latest_change_at(History(CUSTOMERS), frame, events, "at", TRACKED)
    assert got.columns == [*events.columns, *TRACKED]
    expected = {}
    for event_id, customer, at in purchases:
        change = change_at(changes, customer, at)
        expected[event_id] = (change["country"], change["segment"]) if change else (None, None)
    assert {r.event_id: (r.country, r.segment) for r in got.collect()} == expected
    assert sum(v == (None, None) for v in expected.values()) > 5  # unknown and deleted ones


def test_the_version_valid_at_a_time_is_the_change_in_force_when_times_follow_sequences(spark):
    """``valid_at``, the join docs/retail.md shows: with ``updated_at`` rising with the sequence
    number (the usual case), one version at most is valid at a time, and it carries the tracked
    columns of the change in force then. (Where a source's times disagree with its sequence
    numbers, versions can overlap: the change in force is the rule gold follows.)"""
    changes = generated_changes(seed=6)
    rank = {"INSERT": 0, "UPDATE": 1, "DELETE": 2}
    for change in changes:
        change["updated_at"] = START + timedelta(
            hours=10 * change["sequence_num"] + rank[change["operation"]]
        )
    purchases = _purchases(seed=7)
    events = spark.createDataFrame(purchases, "event_id string, customer_id string, at timestamp")
    versions = History(CUSTOMERS, TRACKED).versions(spark.createDataFrame(changes, SCHEMA))
    joined = events.join(
        versions.alias("h"),
        (events["customer_id"] == F.col("h.customer_id")) & valid_at(versions, events["at"]),
        "left",
    )
    got = [(r.event_id, (r.country, r.segment)) for r in joined.collect()]
    assert len(got) == len(purchases)  # one version at most each
    expected = {}
    for event_id, customer, at in purchases:
        change = change_at(changes, customer, at)
        expected[event_id] = (change["country"], change["segment"]) if change else (None, None)
    assert dict(got) == expected


def test_an_unknown_tracked_column_is_refused():
    with pytest.raises(
        ValueError, match="tracked columns \\['colour'\\] are not among name, email"
    ):
        History(CUSTOMERS, ("country", "colour"))


def test_the_fields_of_a_change_are_the_oracles():
    assert History(CUSTOMERS).change_fields == FIELDS
