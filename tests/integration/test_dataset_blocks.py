"""The dataset blocks (medallion/pipelines/blocks/datasets.py, derived.py) on real Spark and
Delta, against plain Python: a dataset's declaration equals its tables and flows written out, its
validation keeps free-text fields as text and names a range rule's breach, a measure over chosen
rows stays exact over batches replayed after a crash, and an append of a source's chosen rows
writes each once."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal

from medallion.config import Config
from medallion.contract_rules import Contract
from medallion.contracts import FieldRule
from medallion.declarations import Flow, Landing, Table
from medallion.pipelines.blocks.datasets import Dataset, ValidatedDataset, range_check
from medallion.pipelines.blocks.derived import AppendWhere, MeasureWhere
from medallion.pipelines.blocks.merges import IncrementalAggregate, Measure
from medallion.pipelines.blocks.tables import bronze_table, quarantine_table, silver_table
from medallion.streams.sinks import Trigger
from medallion.tables import create_delta_table, read_table

ORDERS = Contract(
    "orders",
    (
        FieldRule("order_id", "string", True),
        FieldRule("amount", "money", True),
        FieldRule("score", "number", False),
    ),
    (range_check("score", 0, 10),),
)
SALES = Table(
    "silver",
    "sales",
    "shop STRING NOT NULL, amount DECIMAL(18,4) NOT NULL, flagged BOOLEAN NOT NULL",
)


def test_a_dataset_declares_its_tables_and_flows_as_written_out():
    orders = ValidatedDataset(ORDERS, ("order_id",), free_text=("note",))
    silver = silver_table(ORDERS, zorder=("order_id",))
    quarantine = quarantine_table(ORDERS, "order_id")
    assert orders.tables == (orders.bronze, silver, quarantine)
    assert orders.bronze.columns[:4] == ("order_id", "amount", "score", "note")
    assert orders.bronze == Table(
        "bronze", "orders", orders.bronze.schema, orders.bronze.properties
    )
    assert bronze_table(ORDERS).columns[:3] == ("order_id", "amount", "score")
    bronze, appended = orders.flows
    assert (bronze.name, bronze.source, bronze.outputs) == (
        "bronze_orders",
        Landing("orders"),
        (orders.bronze,),
    )
    assert (appended.name, appended.source, appended.outputs) == (
        "silver_orders",
        orders.bronze,
        (silver, quarantine),
    )
    assert appended.batch.key == ("order_id",) and appended is orders.append_flow
    replay = Dataset(ORDERS, ("order_id",)).replay("silver_orders")
    assert (replay.quarantine, replay.flow, replay.dataset) == (
        quarantine,
        "silver_orders",
        "orders",
    )


def test_a_dataset_keeps_free_text_as_text_and_names_a_range_breach(spark):
    lines = [
        {"order_id": "a", "amount": 5, "score": 3, "note": 12},
        {"order_id": "b", "amount": 5, "score": 11, "note": "late"},
        {"order_id": "c", "amount": 1.5},
    ]
    bronze = spark.createDataFrame(
        [(json.dumps(line), "f.json", datetime(2026, 11, 1)) for line in lines],
        "_raw STRING, _source_file STRING, _ingested_at TIMESTAMP",
    )
    validated = Dataset(ORDERS, ("order_id",), ("note",)).validate(bronze)
    got = {r.order_id: (r.reason, r.note, r.score) for r in validated.collect()}
    assert got == {
        "a": (None, "12", 3.0),
        "b": ("score is outside 0..10: 11", "late", 11.0),
        "c": (None, None, None),
    }


def _flow_function(config: Config, tmp_path, name: str, flow: Flow):
    checkpoint = tmp_path / "checkpoints" / name
    checkpoint.mkdir(parents=True)
    (checkpoint / "metadata").write_text(json.dumps({"id": f"query-{name}"}))
    return flow.batch_function(config, str(checkpoint))


def test_a_measure_over_chosen_rows_stays_exact_over_replayed_batches(spark, tmp_path):
    config = Config(landing=str(tmp_path / "landing"), lake=str(tmp_path / "lake"))
    totals = Table(
        "gold",
        "shop_totals",
        "shop STRING NOT NULL, sales BIGINT NOT NULL, flagged BIGINT NOT NULL, "
        "flagged_amount DECIMAL(28,4) NOT NULL, flagged_max DECIMAL(18,4)",
    )
    create_delta_table(spark, config.table(totals.key), totals.schema, {})
    aggregate = IncrementalAggregate(
        ("shop",),
        (
            Measure("sales", "count"),
            MeasureWhere("flagged", "count", where="flagged"),
            MeasureWhere("flagged_amount", "sum", "amount", "decimal(28,4)", where="flagged"),
            MeasureWhere("flagged_max", "max", "amount", where="flagged"),
        ),
    )
    function = _flow_function(
        config, tmp_path, "totals", Flow("gold_totals", "gold", SALES, (totals,), batch=aggregate)
    )
    batches = [
        [("a", Decimal("5.5"), True), ("a", Decimal("2"), False), ("b", Decimal("1"), False)],
        [("a", Decimal("7.25"), True), ("b", Decimal("3"), False)],
    ]
    for batch_id, batch in enumerate(batches):
        frame = spark.createDataFrame(batch, SALES.schema)
        for _attempt in range(2):  # a replay after a crash writes nothing twice
            function(frame, batch_id)

    want = {}
    for shop, amount, flagged in (row for batch in batches for row in batch):
        sales, count, total, most = want.get(shop, (0, 0, Decimal(0), None))
        if flagged:
            count, total, most = count + 1, total + amount, max(most or amount, amount)
        want[shop] = (sales + 1, count, total, most)
    got = {
        r.shop: (r.sales, r.flagged, r.flagged_amount, r.flagged_max)
        for r in read_table(spark, config.table(totals.key)).collect()
    }
    assert got == want
    types = dict(aggregate.increments(spark.createDataFrame(batches[0], SALES.schema)).dtypes)
    assert types == {
        "shop": "string",
        "sales": "bigint",
        "flagged": "bigint",
        "flagged_amount": "decimal(28,4)",
        "flagged_max": "decimal(18,4)",
    }


def test_an_append_of_chosen_rows_writes_each_once(spark, tmp_path):
    config = Config(landing=str(tmp_path / "landing"), lake=str(tmp_path / "lake"))
    alerts = Table("gold", "alerts", "shop STRING NOT NULL, amount DECIMAL(18,4) NOT NULL")
    for table in (SALES, alerts):
        create_delta_table(spark, config.table(table.key), table.schema, {})
    flow = Flow("gold_alerts", "gold", SALES, (alerts,), AppendWhere("flagged"))
    batches = [
        [("a", Decimal("5.5"), True), ("b", Decimal("1"), False)],
        [("c", Decimal("2"), True)],
    ]
    for batch in batches:
        rows = spark.createDataFrame(batch, SALES.schema)
        rows.write.format("delta").mode("append").save(config.table(SALES.key).path)
        flow.start(spark, config, flow, Trigger()).awaitTermination()
    got = sorted(tuple(r) for r in read_table(spark, config.table(alerts.key)).collect())
    assert got == [
        (shop, amount) for batch in batches for shop, amount, flagged in batch if flagged
    ]
