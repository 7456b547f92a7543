"""The building blocks (medallion/pipelines/blocks/) on real Delta tables, against plain
Python: an incremental aggregate stays exact over batches with late rows, a latest-per-key
table keeps the newest row whatever the arrival order, and a replayed batch writes nothing
twice."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal

import pytest

from medallion.config import Config
from medallion.declarations import Flow, Table
from medallion.pipelines.blocks import IncrementalAggregate, LatestPerKey, Measure
from medallion.tables import create_delta_table, read_table

SOURCE = Table(
    "silver",
    "sales",
    "shop STRING NOT NULL, sold_at TIMESTAMP NOT NULL, amount DECIMAL(18,4) NOT NULL",
)
DAILY = Table(
    "gold",
    "daily_sales",
    "shop STRING NOT NULL, day DATE NOT NULL, sales BIGINT NOT NULL, "
    "amount_sum DECIMAL(28,4) NOT NULL, amount_max DECIMAL(18,4) NOT NULL, "
    "amount_min DECIMAL(18,4) NOT NULL, amount_avg DOUBLE NOT NULL",
)
LATEST = Table("gold", "latest_sale", SOURCE.schema)
AGGREGATE = IncrementalAggregate(
    ("shop", ("day", "to_date(sold_at)")),
    (
        Measure("sales", "count"),
        Measure("amount_sum", "sum", "amount", "decimal(28,4)"),
        Measure("amount_max", "max", "amount"),
        Measure("amount_min", "min", "amount"),
    ),
    (("amount_avg", "CAST(amount_sum AS DOUBLE) / sales"),),
)


def _batches() -> list[list[tuple]]:
    day = lambda d, h: datetime(2026, 11, d, h)  # noqa: E731
    return [
        [
            ("a", day(2, 10), Decimal("5.5")),
            ("a", day(2, 11), Decimal("1.25")),
            ("b", day(2, 9), Decimal("3")),
        ],
        [("a", day(1, 8), Decimal("7")), ("b", day(2, 23), Decimal("0.5"))],  # a late day, a late b
        [("a", day(2, 12), Decimal("-2")), ("b", day(1, 1), Decimal("4"))],  # b's older sale last
    ]


def test_an_incremental_aggregate_and_a_latest_per_key_stay_exact_over_late_batches(
    spark, tmp_path
):
    config = Config(landing=str(tmp_path / "landing"), lake=str(tmp_path / "lake"))
    for table in (DAILY, LATEST):
        create_delta_table(spark, config.table(table.key), table.schema, {})
    functions = []
    for name, table, block in (
        ("daily", DAILY, AGGREGATE),
        ("latest", LATEST, LatestPerKey(("shop",), "sold_at")),
    ):
        checkpoint = tmp_path / "checkpoints" / name
        checkpoint.mkdir(parents=True)
        (checkpoint / "metadata").write_text(json.dumps({"id": f"query-{name}"}))
        flow = Flow(f"gold_{name}", "gold", SOURCE, (table,), batch=block)
        functions.append(flow.batch_function(config, str(checkpoint)))
    rows = []
    for batch_id, batch in enumerate(_batches()):
        frame = spark.createDataFrame(batch, "shop STRING, sold_at TIMESTAMP, amount DECIMAL(18,4)")
        for _attempt in range(2):  # a replay after a crash writes nothing twice
            for function in functions:
                function(frame, batch_id)
        rows += batch

    want = {}
    for shop, sold_at, amount in rows:
        key = (shop, sold_at.date())
        sales, total, most, least = want.get(key, (0, Decimal(0), amount, amount))
        want[key] = (sales + 1, total + amount, max(most, amount), min(least, amount))
    got = {
        (r.shop, r.day): (r.sales, r.amount_sum, r.amount_max, r.amount_min, r.amount_avg)
        for r in read_table(spark, config.table(DAILY.key)).collect()
    }
    assert got == {k: (*v, float(v[1]) / v[0]) for k, v in want.items()}
    newest = {}
    for shop, sold_at, amount in rows:
        if shop not in newest or sold_at > newest[shop][0]:
            newest[shop] = (sold_at, amount)
    latest = {
        r.shop: (r.sold_at, r.amount) for r in read_table(spark, config.table(LATEST.key)).collect()
    }
    assert latest == newest


def test_a_measure_and_a_key_are_checked_when_declared():
    with pytest.raises(ValueError, match="a count takes no column"):
        Measure("n", "count", "amount")
    with pytest.raises(ValueError, match="kind is one of"):
        Measure("n", "median", "amount")
    with pytest.raises(ValueError):
        LatestPerKey(("shop; DROP TABLE x",), "sold_at")
    clauses = AGGREGATE.clauses()
    assert (
        "t.`amount_avg` = CAST((t.`amount_sum` + s.`amount_sum`) AS DOUBLE) / (t.`sales` + s.`sales`)"
        in clauses
    )
    assert "t.`amount_max` = greatest(t.`amount_max`, s.`amount_max`)" in clauses
