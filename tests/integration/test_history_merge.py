"""A history table (SCD type 2) kept by MERGE, batch by batch, on a real Delta table: the same
rows as the plain-Python oracle whatever the arrival order, one commit per batch, and a
replayed batch writes nothing (issue 30)."""

from __future__ import annotations

import pytest
from history_oracle import (
    ORDERS,
    SCHEMA,
    arriving,
    expected_in_order,
    generated_changes,
    history,
    in_batches,
    rows_in_order,
)

from medallion.delta_log import committed_version
from medallion.pipelines.retail.transforms.customers import CUSTOMERS
from medallion.sql_names import TableRef
from medallion.streams.apply_history import apply_history
from medallion.streams.exactly_once import ReplayGuard
from medallion.tables import read_table
from medallion.transforms.history import VERSION_ID, History

pytestmark = pytest.mark.slow
TRACKED = ("country", "segment")


def _empty_history(spark, tmp_path, scd: History) -> TableRef:
    table = TableRef("silver", "customers_history", str(tmp_path / "history"), "scratch.history")
    empty = scd.versions(spark.createDataFrame([], SCHEMA))
    empty.write.format("delta").save(table.path)
    return table


@pytest.mark.parametrize("order", ORDERS)
def test_batches_merged_in_any_order_equal_the_oracle_and_a_replay_writes_nothing(
    spark, tmp_path, order
):
    changes = generated_changes(seed=11)
    scd = History(CUSTOMERS, TRACKED)
    table = _empty_history(spark, tmp_path, scd)
    guard = ReplayGuard(str(tmp_path / "checkpoint"))
    batches = in_batches(arriving(changes, order, seed=12))
    for batch_id, batch in enumerate(batches):
        with guard.batch(spark, batch_id) as writes:
            assert apply_history(
                writes, table, scd, spark.createDataFrame(batch, SCHEMA), "history-test"
            )
    assert committed_version(spark, table) == len(batches)  # one commit a batch
    expected = expected_in_order(changes, TRACKED)
    assert rows_in_order(read_table(spark, table).drop(VERSION_ID)) == expected
    # The last batch again, as after a crash before its checkpoint commit: skipped.
    with ReplayGuard(str(tmp_path / "checkpoint")).batch(spark, len(batches) - 1) as writes:
        assert not apply_history(
            writes, table, scd, spark.createDataFrame(batches[-1], SCHEMA), "history-test"
        )
    assert committed_version(spark, table) == len(batches)
    # Recomputing a batch that is already applied changes no row (the MERGE's own guard):
    # an unchanged row is not rewritten.
    with ReplayGuard(str(tmp_path / "checkpoint")).batch(spark, len(batches)) as writes:
        apply_history(writes, table, scd, spark.createDataFrame(batches[0], SCHEMA), "again")
    assert rows_in_order(read_table(spark, table).drop(VERSION_ID)) == expected
    assert len(history(changes, TRACKED)) > len({c["customer_id"] for c in changes})
