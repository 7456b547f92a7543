"""Pipelines are declarations: each table and flow is described once, and the registry refuses
declarations that would collide or that name tables nobody declared."""

from __future__ import annotations

from pathlib import Path

import pytest

from medallion.config import Config
from medallion.declarations import Flow, Landing, Pipeline, Table, View
from medallion.ops.lineage import mermaid
from medallion.pipelines import all_flows, all_tables, pipelines, register, registered
from medallion.streams.flows import flow as flow_named

# The pipelines medallion ships: one package each that registers one, found by registration
# (a new folder is a new pipeline; no list to edit). blocks/ is what they are made of.
PACKAGES = sorted(
    p.parent.name
    for p in (Path(__file__).resolve().parents[2] / "src/medallion/pipelines").glob("*/__init__.py")
    if "register(" in p.read_text()
)


def _start(*_args: object) -> None:
    return None


def test_retail_is_found_by_registration_with_every_table_and_flow():
    assert [p.name for p in pipelines()] == PACKAGES
    (retail,) = pipelines(["retail"])
    assert [t.key for t in retail.tables][:2] == ["bronze/events", "silver/events"]
    assert len(retail.tables) == 13
    tables = all_tables()
    assert len(tables) == sum(len(p.tables) for p in pipelines())  # no key declared twice
    # Every table a flow writes or reads is declared, and has exactly one writer.
    writers = [key for f in all_flows() for key in f.writes]
    assert sorted(writers) == sorted(tables)
    assert {key for f in all_flows() for key in f.inputs if not key.startswith("landing/")} <= set(
        tables
    )
    # Where a table lives comes from its declaration and the Config alone.
    config = Config(landing="/tmp/landing", lake="/tmp/lake")
    assert config.table("silver/events_quarantine").path == "/tmp/lake/silver/events_quarantine"
    assert tables["silver/events_quarantine"].quarantine
    assert tables["silver/events"].zorder == ("event_date", "event_id")


def test_a_flow_reads_and_writes_tables_not_prose():
    revenue = next(f for f in all_flows() if f.name == "gold_daily_revenue_by_country")
    assert revenue.reads == "silver/events + silver/customers_history + silver/customers"
    changes = next(f for f in all_flows() if f.name == "gold_customer_changes")
    assert changes.reads == "silver/customers (change data feed)"
    assert changes.inputs == ("silver/customers",)


def test_the_registry_refuses_collisions_and_undeclared_tables():
    readings = Table("bronze", "readings", "value STRING")
    with pytest.raises(ValueError, match="writes undeclared tables bronze/other"):
        Pipeline(
            "iot",
            (readings,),
            (
                Flow(
                    "bronze_other",
                    "bronze",
                    Landing("r"),
                    (Table("bronze", "other", "v INT"),),
                    _start,
                ),
            ),
        )
    clash = Pipeline("clash", (Table("bronze", "events", "value STRING"),))
    with pytest.raises(ValueError, match="table bronze/events is declared already"):
        register(clash)
    clash_flow = Pipeline(
        "clash", (readings,), (Flow("bronze_events", "bronze", Landing("r"), (readings,), _start),)
    )
    with pytest.raises(ValueError, match="flow bronze_events is declared already"):
        register(clash_flow)
    assert [p.name for p in pipelines()] == PACKAGES
    with pytest.raises(KeyError, match=f"unknown pipeline 'nope'; known: {', '.join(PACKAGES)}"):
        pipelines(["nope"])
    with pytest.raises(ValueError, match="unknown layer"):
        Table("platinum", "x", "v INT")


def test_a_pipeline_registered_for_a_block_is_forgotten_after_it_and_discovered_ones_stay():
    readings = Table("bronze", "trial_readings", "value STRING")
    trial = Pipeline(
        "trial",
        (readings,),
        (Flow("bronze_trial", "bronze", Landing("trial"), (readings,), _start),),
    )
    with pytest.raises(RuntimeError), registered(trial):
        assert [p.name for p in pipelines()] == sorted([*PACKAGES, "trial"])
        assert flow_named("bronze_trial").source == Landing("trial")
        raise RuntimeError("the block fails")
    assert [p.name for p in pipelines()] == PACKAGES
    (iot,) = pipelines(["iot"])
    with registered(iot):  # a discovered pipeline is the process's: it stays registered
        pass
    assert [p.name for p in pipelines()] == PACKAGES


def test_a_view_reads_declared_tables_and_is_a_chart_or_a_table():
    readings = Table("gold", "readings", "value STRING")
    chart = View("values", "Values", "SELECT 1", ("gold/readings",), "bar", x="a", y="b")
    assert Pipeline("meters", (readings,), views=(chart,)).views == (chart,)
    stray = View("stray", "Stray", "SELECT 1", ("gold/other",), "bar", x="a", y="b")
    with pytest.raises(ValueError, match="reads undeclared tables gold/other"):
        Pipeline("meters", (readings,), views=(stray,))
    with pytest.raises(ValueError, match="a table names columns, a chart x and y"):
        View("rows", "Rows", "SELECT 1", ("gold/readings",), "table")
    with pytest.raises(ValueError, match="a table names columns, a chart x and y"):
        View("line", "Line", "SELECT 1", ("gold/readings",), "line", columns=("a",))
    with pytest.raises(ValueError, match="kind is line, bar or table"):
        View("pie", "Pie", "SELECT 1", ("gold/readings",), "pie", x="a", y="b")


def test_the_documented_lineage_is_the_one_the_declarations_give():
    """docs/architecture.md draws the pipelines medallion documents, each exactly as its
    declaration gives it; a pipeline added as a folder of its own needs no edit there."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()
    lineage = docs.split("## Lineage\n", 1)[1]
    block = lineage.split("```mermaid\n", 1)[1].split("```", 1)[0]
    shown = [p for p in pipelines() if f"  subgraph {p.name}\n" in block]
    assert {"retail", "banking", "iot"} <= {p.name for p in shown}
    assert block == mermaid(shown)
    for flow in (f for p in shown for f in p.flows):
        assert f'|"{flow.name}' in block


def test_a_tables_layout_names_its_own_columns_and_clustering_excludes_the_rest():
    from medallion.declarations import Maintenance

    schema = "day DATE NOT NULL, shop STRING, amount DECIMAL(28,4)"
    table = Table("gold", "sales", schema, partitioned_by=("day",), zorder=("shop",))
    assert (table.partitioned_by, table.maintenance) == (("day",), Maintenance())
    with pytest.raises(ValueError, match="partitioned_by names no column"):
        Table("gold", "sales", schema, partitioned_by=("month",))
    with pytest.raises(ValueError, match="neither partitioned nor Z-ordered"):
        Table("gold", "sales", schema, clustered_by=("shop",), zorder=("day",))


def test_a_replay_names_only_flows_that_declare_a_batch_its_also_flows_included():
    from medallion.declarations import QuarantineReplay

    bronze = Table("bronze", "things", "value STRING")
    silver = Table("silver", "things", "id STRING")
    quarantine = Table("silver", "things_quarantine", "reason STRING", quarantine=True)
    history = Table("silver", "things_history", "id STRING")

    def batch(*_args: object) -> None:
        return None

    flows = (
        Flow("silver_things", "silver", bronze, (silver, quarantine), batch=batch),
        Flow("silver_things_history", "silver", bronze, (history,), _start),
    )
    replay = QuarantineReplay(quarantine, "silver_things", "things", _start)
    tables = (bronze, silver, quarantine, history)
    Pipeline("things", tables, flows, replays=(replay,))
    also = QuarantineReplay(
        quarantine, "silver_things", "things", _start, also=("silver_things_history",)
    )
    with pytest.raises(ValueError, match="silver_things_history declares no batch"):
        Pipeline("things", tables, flows, replays=(also,))


def test_a_flow_that_reads_a_change_feed_its_source_does_not_record_is_refused():
    plain = Table("silver", "users", "user_id STRING, country STRING")
    feed = {"delta.enableChangeDataFeed": "true"}
    recorded = Table("silver", "users", "user_id STRING, country STRING", feed)
    gold = Table("gold", "users_per_country", "country STRING, users BIGINT")

    def batch(*_args: object) -> None:
        return None

    for start, batch_factory in ((_start, None), (None, batch)):
        with pytest.raises(ValueError, match="'gold_users'.*silver/users has no change data feed"):
            Flow("gold_users", "gold", plain, (gold,), start, change_feed=True, batch=batch_factory)
        declared = Flow(
            "gold_users", "gold", recorded, (gold,), start, change_feed=True, batch=batch_factory
        )
        assert declared.reads == "silver/users (change data feed)"
    with pytest.raises(ValueError, match="landing/users has no change data feed"):
        Flow("bronze_users", "bronze", Landing("users"), (plain,), _start, change_feed=True)
    # Every flow medallion ships that reads a change feed reads one its source records.
    assert all(f.source.change_data_feed for f in all_flows() if f.change_feed)
