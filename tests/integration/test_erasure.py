"""Erasure of a data subject (issue 29): after ``medallion erase``, every table equals the
oracle computed as if the subject's lines had never landed, the streams run on without
reprocessing, and an erasure cut short is finished by the next run of it."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

import pytest
from banking_oracle import Deliveries
from lake_checks import (
    assert_banking_matches,
    assert_customers_match,
    assert_lake_matches,
    daily_revenue,
    lake_snapshot,
    rows_of,
)
from lake_copy import copy_lake
from oracle import expected_customers, expected_from, read_file_lines
from processes import wait_until
from pyspark.sql import functions as F
from stream_thread import StreamInThread

from medallion.config import Config
from medallion.delta_log import committed_version
from medallion.erasure_log import erasures_table
from medallion.faults import InjectedFault
from medallion.ops.erase import erase_subject
from medallion.streams.runner import run_available_now
from medallion.tables import read_table

pytestmark = pytest.mark.slow  # copies of the shared reference lake, several erasures


def _without(landing: Path, target: Path, subject: str) -> Path:
    """A landing folder like ``landing`` whose files lack every line holding the subject."""
    literal = json.dumps(subject)
    for folder in (p for p in landing.iterdir() if p.is_dir()):
        for path in sorted(p for p in folder.iterdir() if p.is_file()):
            kept = [line for line in read_file_lines(path) if literal not in line]
            (target / folder.name).mkdir(parents=True, exist_ok=True)
            (target / folder.name / path.name).write_text("".join(f"{x}\n" for x in kept))
    return target


def _shopper(landing: Path) -> str:
    """A known customer with purchases, and a re-sent copy of one of their events under
    another user when there is one (its erasure then promotes that copy)."""
    events, customers = expected_from(landing), expected_customers(landing)
    purchases = Counter(
        e["user_id"] for e in events.silver.values() if e["event_type"] == "purchase"
    )
    users_by_id = defaultdict(set)
    for record in json_records(landing, "events"):
        if "event_id" in record and "user_id" in record:
            users_by_id[record["event_id"]].add(record["user_id"])
    shared = {u for ids in users_by_id.values() if len(ids) > 1 for u in ids}
    known = [u for u in purchases if u in customers.state]
    return max(known, key=lambda u: (u in shared, purchases[u], u))


def json_records(landing: Path, dataset: str) -> list[dict]:
    """The JSON objects among the landed lines of ``dataset`` whose fields are text."""
    records = []
    for path in sorted((landing / dataset).iterdir()):
        for line in read_file_lines(path):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and all(isinstance(v, str) for v in record.values()):
                records.append(record)
    return records


def _revenue_per_day(revenue: dict) -> dict:
    days: dict = defaultdict(lambda: [Decimal(0), 0])
    for (day, _country), row in revenue.items():
        days[day][0] += row["revenue"]
        days[day][1] += row["purchases"]
    return {day: tuple(v) for day, v in days.items()}


def test_a_shopper_erased_leaves_every_table_as_if_they_had_never_landed(
    spark, reference_lake, tmp_path
):
    landing, lake = copy_lake(reference_lake, tmp_path / "copy")
    config = Config(landing=str(landing), lake=str(lake), pipelines=("retail",))
    shopper = _shopper(landing)
    revenue_before = daily_revenue(spark, config)

    planned = {t.table: t for t in erase_subject(spark, config, shopper, dry_run=True).tables}
    assert not (lake / "_system" / "erasures").exists()  # a dry run writes nothing

    # Cut short after silver's events are gone and before bronze's; the next run finishes it.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MEDALLION_FAIL_AT", "erasure:silver_events")
        with pytest.raises(InjectedFault):
            erase_subject(spark, config, shopper)
    result = erase_subject(spark, config, shopper)
    assert result.erasure_id == 1

    oracle_landing = _without(landing, tmp_path / "oracle", shopper)
    events, customers = expected_from(oracle_landing), expected_customers(oracle_landing)
    assert_lake_matches(spark, config, events)
    assert_customers_match(spark, config, customers)
    for key in ("gold/customer_changes", "gold/hourly_product_users", "gold/revenue_purchases"):
        rows = rows_of(config, key)
        assert shopper not in {r["customer_id" if "customer_id" in r else "user_id"] for r in rows}
    # Revenue: the days of the shopper's purchases recomputed, every other row as it was.
    revenue = daily_revenue(spark, config)
    days = set(planned["gold/daily_revenue_by_country"].scope)
    assert {k: v for k, v in revenue.items() if k[0] not in days} == {
        k: v for k, v in revenue_before.items() if k[0] not in days
    }
    want: dict = defaultdict(lambda: [Decimal(0), 0])
    for event in events.silver.values():
        if event["event_type"] == "purchase":
            want[event["event_timestamp"].date()][0] += event["revenue"]
            want[event["event_timestamp"].date()][1] += 1
    assert _revenue_per_day(revenue) == {d: tuple(v) for d, v in want.items()}

    # The log: the hashed subject, never the id; each table's rows as planned.
    log = read_table(spark, erasures_table(config)).collect()
    assert shopper not in json.dumps([r.asDict() for r in log], default=str)
    assert {r.action for r in log} >= {"started", "keys", "deleted", "recomputed", "finished"}
    deleted = {r.table_key: r.rows for r in log if r.action == "deleted"}
    assert deleted == {k: p.rows for k, p in planned.items() if not p.scope}
    recomputed = {r.table_key: r.rows for r in log if r.action == "recomputed"}
    assert recomputed["gold/daily_revenue_by_country"] == sum(k[0] in days for k in revenue)

    # The streams go on without reading anything again, and erased stays erased: the
    # shopper's old lines sent again are dropped before bronze, and counted in the log.
    before = lake_snapshot(spark, config)
    literal, resent = json.dumps(shopper), 0
    for dataset in ("events", "customers"):
        lines = [x for p in sorted(landing.joinpath(dataset).iterdir()) for x in read_file_lines(p)]
        theirs = [x for x in lines if literal in x]
        landing.joinpath(dataset, "resent.json").write_text("".join(f"{x}\n" for x in theirs))
        resent += len(theirs)
    run_available_now(spark, config)
    assert lake_snapshot(spark, config) == before
    log = read_table(spark, erasures_table(config)).where("action = 'dropped'").collect()
    assert sum(r.rows for r in log) == resent > 0


def _dropped(running) -> int:
    """The lines the queries' batches dropped as an erased subject's (observed metrics)."""
    return sum(
        int(row["dropped"] or 0)
        for _, query in running
        for progress in query.recentProgress
        for name, row in progress.observedMetrics.items()
        if name.startswith("erased_lines_")
    )


def test_an_account_erased_beside_a_running_stream_leaves_banking_as_if_it_had_never_landed(
    spark, reference_lake, tmp_path
):
    landing, lake = copy_lake(reference_lake, tmp_path / "copy")
    config = Config(landing=str(landing), lake=str(lake), pipelines=("banking",))
    counts = Counter(
        t["account_id"] for t in json_records(landing, "transactions") if "account_id" in t
    )
    account = max(counts, key=lambda a: (counts[a], a))
    retail = Config(landing=str(landing), lake=str(lake), pipelines=("retail",))
    retail_before = lake_snapshot(spark, retail)
    transactions = config.table("silver/transactions")
    before = read_table(spark, transactions).where(F.col("account_id") == account).count()
    version = committed_version(spark, transactions)
    oracle_landing = _without(landing, tmp_path / "oracle", account)

    # `run --stream` runs beside the erasure: it pauses its queries for it, then goes on.
    watched: list = []
    with StreamInThread(spark, config, watch=lambda running: watched.append(list(running))):
        assert wait_until(lambda: watched, 120)
        started = {query.runId for _, query in watched[-1]}
        result = erase_subject(spark, config, account, vacuum=True)
        # The queries started again read the account's old lines, landed again, and drop them.
        literal, resent = json.dumps(account), 0
        for dataset in ("transactions", "accounts"):
            lines = [x for p in sorted((landing / dataset).iterdir()) for x in read_file_lines(p)]
            theirs = [x for x in lines if literal in x]
            (landing / dataset / "resent.json").write_text("".join(f"{x}\n" for x in theirs))
            resent += len(theirs)
        assert wait_until(lambda: _dropped(watched[-1]) == resent > 0, 120), resent
        assert not started & {query.runId for _, query in watched[-1]}
    assert sum(t.rows for t in result.tables) > 0
    # VACUUM ran with maintenance's retention: no file is old enough yet, so the erased rows
    # stay reachable by time travel until the retention has passed (docs/governance.md).
    assert result.vacuumed_files == 0
    old = read_table(spark, transactions, version).where(F.col("account_id") == account)
    assert old.count() == before > 0
    assert_banking_matches(spark, config, Deliveries(oracle_landing).ran())
    assert lake_snapshot(spark, retail) == retail_before  # another pipeline is not touched
    log = read_table(spark, erasures_table(config)).where("action = 'dropped'").collect()
    assert sum(r.rows for r in log) == resent
