"""A retail lake written by the code from before pipelines were declared is continued by
today's code: same table paths, catalog names and checkpoint folders; every stream resumes after
its last batch, and nothing is read twice.

The lake is kept in tests/data/old-layout-lake.tar.gz, written by the code of commit
``07c36dc`` (the last commit of that layout) with tests/data/make_old_layout_lake.py."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from history_oracle import (
    expected_in_order,
    expected_revenue_at_purchase,
    landed_changes,
    rows_in_order,
)
from lake_checks import assert_customers_match, assert_lake_matches, daily_revenue, rows_of
from lake_copy import follow_move
from oracle import expected_customers, expected_from

from medallion.config import Config
from medallion.pipelines import pipelines
from medallion.pipelines.retail.generator import generate
from medallion.streams.runner import run_available_now
from medallion.tables import read_table

pytestmark = pytest.mark.slow  # left out of make test-fast (docs/testing.md)

ARCHIVE = Path(__file__).resolve().parents[1] / "data" / "old-layout-lake.tar.gz"
# The last commit whose retail tables and flows were not declared (pipelines/retail came next).
BEFORE_DECLARATIONS = "07c36dcb715ac980a23573457f3701bdb728dc0a"
RETAIL_STREAMS = ("bronze_events", "bronze_customers", "silver_customers", "gold_customer_changes")


def _unpack_old_lake(target: Path) -> tuple[Path, Path]:
    """The archived landing folder and lake, moved to ``target`` (tests/lake_copy.py)."""
    with tarfile.open(ARCHIVE) as tar:
        tar.extractall(target, filter="data")
    manifest = json.loads((target / "manifest.json").read_text())
    assert manifest["commit"] == BEFORE_DECLARATIONS
    follow_move(target / "lake", manifest["root"], str(target))
    return target / "landing", target / "lake"


def _committed(checkpoint: Path) -> list[int]:
    return sorted(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())


def _folders(root: Path, parents: tuple[str, ...]) -> set[str]:
    return {f"{parent}/{p.name}" for parent in parents for p in (root / parent).glob("*")}


def test_a_lake_of_the_old_layout_continues_without_reprocessing(spark, tmp_path):
    landing, lake = _unpack_old_lake(tmp_path)
    tables_before = _folders(lake, ("bronze", "silver", "gold"))
    checkpoints_before = _folders(lake, ("_checkpoints",))
    checkpoints = lake / "_checkpoints"
    batches_before = {name: _committed(checkpoints / name) for name in RETAIL_STREAMS}
    first_offsets = {
        name: (checkpoints / name / "offsets" / "0").read_bytes() for name in RETAIL_STREAMS
    }
    assert all(batches_before.values())

    generate(str(landing), events=200, customers=20, files=1, seed=32)
    config = Config(landing=str(landing), lake=str(lake))
    report = run_available_now(spark, config)
    (retail,) = pipelines(["retail"])
    assert {t.table for t in report.tables} <= {t.key for t in retail.tables}
    # Only retail had input or tables: no other pipeline's table appeared, and retail's kept
    # their folders and checkpoints; the customer history and the revenue stream's ledger,
    # newer than that layout, were added.
    added = _folders(lake, ("bronze", "silver", "gold")) - tables_before
    assert tables_before <= _folders(lake, ("bronze", "silver", "gold"))
    assert added == {"silver/customers_history", "gold/revenue_purchases"}
    assert checkpoints_before <= _folders(lake, ("_checkpoints",))
    for name, before in batches_before.items():
        after = _committed(checkpoints / name)
        assert after[: len(before)] == before, name
        assert len(after) > len(before), f"{name} did not resume"
        assert (checkpoints / name / "offsets" / "0").read_bytes() == first_offsets[name], name
    # Every line once: a stream that started again from batch 0 would have doubled bronze.
    expected = expected_from(landing)
    assert_lake_matches(spark, config, expected)
    assert_customers_match(spark, config, expected_customers(landing))
    assert spark.table("medallion.silver_events").count() == len(rows_of(config, "silver/events"))
    # The history was filled from the old lake's bronze once, then kept by the new batch.
    history = rows_in_order(read_table(spark, config.table("silver/customers_history")))
    assert history == expected_in_order(landed_changes(landing))
    # Revenue counted the country known at processing time; every purchase is counted again
    # once, under the country at purchase time, into the ledger (pipelines/retail/revenue.py).
    changes = landed_changes(landing)
    assert daily_revenue(spark, config) == expected_revenue_at_purchase(expected.silver, changes)
    purchases = sorted(k for k, e in expected.silver.items() if e["event_type"] == "purchase")
    assert sorted(r["event_id"] for r in rows_of(config, "gold/revenue_purchases")) == purchases
