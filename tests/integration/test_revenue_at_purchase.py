"""``gold/daily_revenue_by_country`` counts each purchase under the country its customer had at
the time (issue 30): equal to the plain-Python oracle whatever the order in which purchases and
customer changes land, late older changes, deletes, re-inserts and copies included; after a
crash inside a batch, on a lake from before the ledger of counted
purchases, and on a lake whose revenue stream counted the country known at processing time."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
from history_oracle import (
    ORDERS,
    arriving,
    expected_revenue_at_purchase,
    in_batches,
    landed_changes,
)
from lake_checks import daily_revenue
from oracle import expected_from

from medallion.config import Config
from medallion.faults import FAIL_AT_ENV
from medallion.generate import write_file_atomically
from medallion.pipelines.retail.generator import generate_customer_lines, generate_event_lines
from medallion.streams.flows import flow
from medallion.streams.runner import PipelineError, run_available_now
from medallion.tables import delta_table, history, read_table

pytestmark = pytest.mark.slow

REVENUE_FLOWS = tuple(
    flow(name)
    for name in (
        "bronze_events",
        "bronze_customers",
        "silver_events",
        "silver_customers",
        "gold_daily_revenue_by_country",
    )
)


def _change(customer: str, operation: str, sequence: int, at: str, country: str = "DE") -> str:
    return json.dumps(
        {
            "customer_id": customer,
            "name": "Eve",
            "email": "eve@example.com",
            "country": country,
            "segment": "smb",
            "operation": operation,
            "sequence_num": sequence,
            "updated_at": at,
        }
    )


def _purchase(event_id: str, customer: str, at: str, revenue: float = 10.0) -> str:
    return json.dumps(
        {
            "event_id": event_id,
            "event_type": "purchase",
            "user_id": customer,
            "product_id": "p0001",
            "revenue": revenue,
            "event_timestamp": at,
        }
    )


def _customer_lines() -> list[str]:
    """Generated changes (shuffled, re-sent, tied, invalid) and changes amid the purchases: a
    move, a delete then a re-insert, and a late change older than all of its customer's."""
    return [
        *generate_customer_lines(40, seed=7),
        _change("c00001", "UPDATE", 100, "2026-11-21T00:00:00Z", "JP"),
        _change("c00002", "DELETE", 100, "2026-11-20T12:00:00Z"),
        _change("c00002", "INSERT", 101, "2026-11-21T06:00:00Z", "BR"),
        _change("c00003", "UPDATE", 0, "2026-11-20T00:00:00Z", "ZA"),
        _change("h1", "INSERT", 1, "2026-10-01T00:00:00Z"),
        _change("h1", "UPDATE", 3, "2026-10-03T00:00:00Z", "FR"),
        _change("h1", "DELETE", 4, "2026-10-04T00:00:00Z"),
        _change("h1", "INSERT", 6, "2026-10-06T00:00:00Z", "ES"),
        _change("h1", "UPDATE", 0, "2026-10-02T00:00:00Z", "AR"),  # older than all of h1's
    ]


def _event_lines() -> list[str]:
    """Generated events of 50 users (40 with changes), and h1's purchases around its changes,
    one of them re-sent."""
    h1 = [
        _purchase(f"h1-{day}", "h1", f"2026-10-{day:02d}T12:00:00Z", revenue=day)
        for day in (1, 2, 3, 4, 5, 6, 7)
    ]
    before_all = _purchase("h1-0", "h1", "2026-09-30T12:00:00Z")
    return [*generate_event_lines(900, seed=8, users=50), *h1, before_all, h1[2]]


def _land_and_run(
    spark, config: Config, items: list[tuple[str, str]], batches: int = 3, first: int = 0
) -> None:
    """Land ``items`` ((dataset, line) pairs) in ``batches`` deliveries, a run after each."""
    for i, chunk in enumerate(in_batches(items, batches), start=first):
        for dataset in ("customers", "events"):
            lines = [line for kind, line in chunk if kind == dataset]
            if lines:
                write_file_atomically(f"{config.landing}/{dataset}", f"{i:02d}.json", lines)
        run_available_now(spark, config, REVENUE_FLOWS)


def _expected(config: Config) -> dict:
    landing = Path(config.landing)
    return expected_revenue_at_purchase(expected_from(landing).silver, landed_changes(landing))


def _items() -> list[tuple[str, str]]:
    return [("customers", line) for line in _customer_lines()] + [
        ("events", line) for line in _event_lines()
    ]


@pytest.mark.parametrize("order", ORDERS)
def test_revenue_by_country_is_the_oracles_whatever_the_arrival_order(spark, tmp_path, order):
    # As generated, every change lands before any purchase; reversed, every purchase first.
    config = Config(landing=str(tmp_path / "landing"), lake=str(tmp_path / "lake"))
    _land_and_run(spark, config, arriving(_items(), order, seed=9))
    expected = _expected(config)
    assert daily_revenue(spark, config) == expected
    # h1 alone bought in early October: the late change of sequence 0 loses to the INSERT of
    # sequence 1 on 2 October, and the DELETE leaves 4 and 5 October unknown.
    early = {
        (day.isoformat(), country): row["purchases"]
        for (day, country), row in expected.items()
        if day < date(2026, 10, 8)
    }
    assert early == {
        ("2026-09-30", "unknown"): 1,
        ("2026-10-01", "DE"): 1,
        ("2026-10-02", "DE"): 1,
        ("2026-10-03", "FR"): 1,
        ("2026-10-04", "unknown"): 1,
        ("2026-10-05", "unknown"): 1,
        ("2026-10-06", "ES"): 1,
        ("2026-10-07", "ES"): 1,
    }


def test_changes_that_land_after_every_purchase_correct_the_days_they_move(spark, tmp_path):
    # Every purchase first, then deliveries of customer changes alone: silver's events do not
    # move, so the revenue stream runs on the history's feed.
    config = Config(landing=str(tmp_path / "landing"), lake=str(tmp_path / "lake"))
    items = _items()
    purchases = [item for item in items if item[0] == "events"]
    changes = [item for item in items if item[0] == "customers"]
    _land_and_run(spark, config, purchases, batches=1)
    _land_and_run(spark, config, changes, batches=2, first=1)
    assert daily_revenue(spark, config) == _expected(config)


def _writes(spark, table) -> int:
    """The table's commits that wrote rows: its MERGEs, and the append that takes a MERGE's
    place in a table without rows."""
    return history(spark, table).where("operation IN ('MERGE', 'WRITE')").count()


@pytest.mark.parametrize(
    "point, ledger_writes, gold_writes",
    [("gold_revenue:counted", 1, 0), ("gold_revenue:added", 1, 1)],
)
def test_a_crash_inside_a_batch_is_replayed_without_a_second_write(
    spark, tmp_path, monkeypatch, point, ledger_writes, gold_writes
):
    """Killed between the ledger's commit and gold's, or after both before the batch's: the
    replay writes what is missing once, and gold is the oracle's."""
    config = Config(landing=str(tmp_path / "landing"), lake=str(tmp_path / "lake"))
    items = _items()
    monkeypatch.setenv(FAIL_AT_ENV, point)
    with pytest.raises(PipelineError, match="stream .gold_daily_revenue_by_country. .* failed"):
        _land_and_run(spark, config, items, batches=1)
    monkeypatch.delenv(FAIL_AT_ENV)
    ledger = config.table("gold/revenue_purchases")
    gold = config.table("gold/daily_revenue_by_country")
    assert (_writes(spark, ledger), _writes(spark, gold)) == (ledger_writes, gold_writes)
    run_available_now(spark, config, REVENUE_FLOWS)  # replays the batch
    assert (_writes(spark, ledger), _writes(spark, gold)) == (1, 1)
    assert daily_revenue(spark, config) == _expected(config)


def test_a_lake_counted_without_the_ledger_fills_it_from_where_the_stream_stands(spark, tmp_path):
    """An earlier medallion kept gold without gold/revenue_purchases: the ledger is filled
    once from the purchases the stream has read, and the stream resumes from its checkpoint."""
    config = Config(landing=str(tmp_path / "landing"), lake=str(tmp_path / "lake"))
    items = _items()
    _land_and_run(spark, config, items[: len(items) // 2], batches=1)
    ledger = config.table("gold/revenue_purchases")
    counted = read_table(spark, ledger).count()
    delta_table(spark, ledger).delete()  # as a lake from before the ledger has it
    run_available_now(spark, config, REVENUE_FLOWS)
    assert read_table(spark, ledger).count() == counted
    # Gold recomputed from the filled ledger (a WRITE), not emptied to count afresh (a DELETE).
    gold = config.table("gold/daily_revenue_by_country")
    operations = [r.operation for r in history(spark, gold).collect()]
    assert operations[0] == "WRITE" and "DELETE" not in operations
    _land_and_run(spark, config, items[len(items) // 2 :], batches=1, first=2)
    assert daily_revenue(spark, config) == _expected(config)


def test_a_lake_that_counted_the_country_at_processing_time_is_recomputed_once(spark, tmp_path):
    config = Config(landing=str(tmp_path / "landing"), lake=str(tmp_path / "lake"))
    items = _items()
    old = config.with_options(settings={"revenue_country": "at_processing"})
    _land_and_run(spark, old, items[: len(items) // 2], batches=1)
    _land_and_run(spark, config, items[len(items) // 2 :], batches=1, first=1)
    assert daily_revenue(spark, config) == _expected(config)
    # Back to the additive stream over recomputed rows: refused, with the way to rebuild.
    more = [("events", _purchase("late-1", "h1", "2026-10-06T13:00:00Z"))]
    with pytest.raises(PipelineError, match="revenue_country=at_processing"):
        _land_and_run(spark, old, more, batches=1, first=2)
