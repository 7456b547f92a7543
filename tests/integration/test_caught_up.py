"""An available-now run does not start a stream that has read every version of its source,
and starts it whenever that cannot be told for sure; the run's summary stays exact."""

from __future__ import annotations

import shutil

import pytest
from history_oracle import expected_revenue_at_purchase, landed_changes
from lake_checks import assert_change_feed_audited, assert_lake_matches, daily_revenue
from oracle import expected_from

from medallion.delta_log import latest_checksum
from medallion.pipelines.retail.generator import generate
from medallion.sql_names import TableRef
from medallion.streams.caught_up import has_read_everything
from medallion.streams.flows import flow
from medallion.streams.runner import run_available_now
from medallion.tables import create_table, read_table, row_count

pytestmark = pytest.mark.slow  # left out of make test-fast (docs/testing.md)

CUSTOMER_STREAMS = ("silver_customers", "gold_customer_changes")


def _offsets(lake, stream: str) -> list[str]:
    return sorted(p.name for p in (lake / "_checkpoints" / stream / "offsets").iterdir())


def test_streams_with_nothing_new_are_not_started_and_start_when_their_source_grows(
    spark, config, dirs
):
    landing, lake = dirs
    generate(str(landing), events=300, customers=40, files=2, seed=21)
    run_available_now(spark, config)

    # Only events land: the customer streams have nothing to read and are not started.
    generate(str(landing), events=200, customers=0, files=1, seed=22)
    offsets = {s: _offsets(lake, s) for s in CUSTOMER_STREAMS}
    report = run_available_now(spark, config)
    assert {s: report.batches[s] for s in CUSTOMER_STREAMS} == dict.fromkeys(CUSTOMER_STREAMS, 0)
    assert {s: report.flow_seconds[s] for s in CUSTOMER_STREAMS} == dict.fromkeys(
        CUSTOMER_STREAMS, 0.0
    )
    assert {s: _offsets(lake, s) for s in CUSTOMER_STREAMS} == offsets
    assert report.batches["gold_daily_revenue_by_country"] >= 1
    for summary in report.tables:
        table = config.table(summary.table)
        assert summary.total_rows == read_table(spark, table).count(), summary.table
    assert_lake_matches(spark, config, expected_from(landing))

    # Customer changes land: both streams run again.
    generate(str(landing), events=0, customers=30, files=1, seed=23)
    report = run_available_now(spark, config)
    assert all(report.batches[s] >= 1 for s in CUSTOMER_STREAMS), report.batches
    expected = expected_from(landing)
    assert_lake_matches(spark, config, expected)
    assert_change_feed_audited(spark, config)
    # Silver's events did not move, the history did: the revenue stream ran on its feed.
    assert report.batches["gold_daily_revenue_by_country"] >= 1
    changes = landed_changes(landing)
    assert daily_revenue(spark, config) == expected_revenue_at_purchase(expected.silver, changes)


def test_a_stream_runs_when_its_position_cannot_be_trusted(spark, config, dirs):
    landing, lake = dirs
    generate(str(landing), events=50, customers=20, files=1, seed=31)
    run_available_now(spark, config)
    silver_customers = flow("silver_customers")
    assert has_read_everything(spark, config, silver_customers)
    assert not has_read_everything(spark, config, flow("bronze_events"))  # a landing source

    # A batch planned but not committed must be replayed.
    offsets = lake / "_checkpoints" / "silver_customers" / "offsets"
    last = max(int(p.name) for p in offsets.iterdir() if p.name.isdigit())
    shutil.copy(offsets / str(last), offsets / str(last + 1))
    assert not has_read_everything(spark, config, silver_customers)
    (offsets / str(last + 1)).unlink()
    assert has_read_everything(spark, config, silver_customers)

    # The source table was replaced by another (another id, fewer versions): the stream
    # must meet it, and Delta's own check, rather than be skipped.
    bronze = config.table("bronze/customers")
    shutil.rmtree(bronze.path)
    create_table(spark, bronze)
    assert not has_read_everything(spark, config, silver_customers)


def test_row_count_reads_the_checksum_without_a_job_and_subtracts_deleted_rows(spark, tmp_path):
    table = TableRef("scratch", "dv", str(tmp_path / "dv"), "medallion.scratch_dv")
    writer = spark.range(100).write.format("delta")
    writer.option("delta.enableDeletionVectors", "true").save(table.path)
    spark.sql(f"DELETE FROM {table.sql_name} WHERE id < 7")
    files = latest_checksum(spark, table)["allFiles"]
    assert any(f.get("deletionVector") for f in files)  # the deleted rows are only marked

    context = spark.sparkContext
    context.setJobGroup("row-count", "row_count from the checksum")
    try:
        counted = row_count(spark, table)
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    assert context.statusTracker().getJobIdsForGroup("row-count") == []
    assert counted == read_table(spark, table).count() == 93
