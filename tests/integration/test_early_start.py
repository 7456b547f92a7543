"""A flow that reads what a fused head commits starts once the head has committed it, before the
head's run ends, and runs again when the head committed more meanwhile; the lake stays exact."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest
from history_oracle import expected_revenue_at_purchase, landed_changes
from lake_checks import assert_lake_matches, daily_revenue
from oracle import expected_from

from medallion.pipelines.retail.generator import generate
from medallion.pipelines.retail.tables import TABLES
from medallion.streams import early_start, fusion
from medallion.streams.drain import dependencies
from medallion.streams.early_start import EarlyStarts
from medallion.streams.flows import flow
from medallion.streams.runner import run_available_now
from medallion.tables import create_table

REVENUE = "gold_daily_revenue_by_country"


def _early_starts(spark, config, monkeypatch) -> EarlyStarts:
    monkeypatch.setattr(early_start, "POLL_SECONDS", 0.0)
    flows = tuple(flow(name) for name in ("bronze_events", "silver_customers", REVENUE))
    fusions = {f.head.name: f for f in fusion.plans(spark, config, flows)}
    return EarlyStarts(spark, config, flows, dependencies(flows, fusions))


def _commit_silver_events(spark, config, n: int) -> None:
    """A new version of silver/events."""
    silver = config.table("silver/events")
    spark.sql(f"ALTER TABLE {silver.sql_name} SET TBLPROPERTIES ('test.commit' = '{n}')")


def test_a_reader_of_a_head_may_start_once_the_head_committed_what_it_reads(
    spark, config, monkeypatch
):
    for table in TABLES:
        create_table(spark, config.table(table.key))
    early = _early_starts(spark, config, monkeypatch)
    revenue, customers = flow(REVENUE), flow("silver_customers")
    waiting = [revenue]

    # The head has committed nothing yet: the revenue stream waits.
    assert early.ready(waiting, {REVENUE: {"bronze_events"}}) == []
    _commit_silver_events(spark, config, 1)
    # A writer that is not a fused head still has to finish first.
    assert early.ready(waiting, {REVENUE: {"bronze_events", customers.name}}) == []
    assert early.ready(waiting, {REVENUE: {"bronze_events"}}) == [revenue]

    early.starting(revenue)
    assert early.ran_early(REVENUE) and early.read_everything(revenue)
    assert early.ready(waiting, {REVENUE: {"bronze_events"}}) == []  # once only
    _commit_silver_events(spark, config, 2)
    assert not early.read_everything(revenue)  # silver moved on: it runs again


@pytest.mark.slow
def test_a_run_of_several_batches_starts_the_revenue_stream_early_and_stays_exact(
    spark, config, dirs, caplog
):
    landing, _ = dirs
    # Eight batches of events against four of customers: the revenue stream, which also waits
    # for silver_customers, can start early while the events' head still has batches to go,
    # however slow the machine (with three of each, a slow machine started it after the last).
    generate(str(landing), events=800, customers=60, files=8, seed=41)
    config = replace(config, max_files_per_trigger=1)
    with caplog.at_level(logging.INFO, logger="medallion"):
        report = run_available_now(spark, config)

    started = [r.getMessage() for r in caplog.records if r.getMessage().startswith("starting")]
    assert f"starting {REVENUE} early (gold, available now)" in started
    assert f"starting {REVENUE} (gold, available now)" in started  # silver moved on meanwhile
    finished = [r.getMessage() for r in caplog.records if r.getMessage().startswith(REVENUE)]
    assert len(finished) == 1, finished  # one line for its two runs
    assert report.batches[REVENUE] >= 2
    expected = expected_from(landing)
    assert_lake_matches(spark, config, expected)
    assert daily_revenue(spark, config) == expected_revenue_at_purchase(
        expected.silver, landed_changes(landing)
    )
