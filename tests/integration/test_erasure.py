"""Erasure of a data subject (issue 29): after ``medallion erase``, every table equals the
oracle computed as if the subject's lines had never landed, the streams run on without
reprocessing, and an erasure cut short is finished by the next run of it."""

from __future__ import annotations

import io
import json
import os
from collections import Counter, defaultdict
from datetime import datetime, timezone
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
from subject_oracle import BANKING_FIELDS, RETAIL_FIELDS, holds_subject

from medallion.cli import main
from medallion.config import Config
from medallion.delta_log import committed_version
from medallion.erasure_log import ERASURES_SCHEMA, erasures_table
from medallion.errors import ConfigError, PipelineError
from medallion.faults import InjectedFault
from medallion.ops.erase import erase_subject
from medallion.ops.erasure_requests import erase_requested, pending_requests
from medallion.pipelines import generate_input
from medallion.streams.runner import run_available_now
from medallion.subjects import legacy_salted_hash
from medallion.tables import append_rows, create_delta_table, read_table

pytestmark = pytest.mark.slow  # copies of the shared reference lake, several erasures


def _fields(dataset: str) -> tuple[str, ...]:
    return BANKING_FIELDS if dataset in ("transactions", "accounts") else RETAIL_FIELDS


def _theirs(landing: Path, dataset: str, subject: str) -> list[str]:
    """The landed lines of ``dataset`` that are the subject's (tests/subject_oracle.py)."""
    lines = [x for p in sorted((landing / dataset).iterdir()) for x in read_file_lines(p)]
    return [x for x in lines if holds_subject(x, _fields(dataset), subject)]


def _without(landing: Path, target: Path, subject: str) -> Path:
    """A landing folder like ``landing`` whose files lack every line of the subject."""
    for folder in (p for p in landing.iterdir() if p.is_dir()):
        fields = _fields(folder.name)
        for path in sorted(p for p in folder.iterdir() if p.is_file()):
            kept = [x for x in read_file_lines(path) if not holds_subject(x, fields, subject)]
            (target / folder.name).mkdir(parents=True, exist_ok=True)
            (target / folder.name / path.name).write_text("".join(f"{x}\n" for x in kept))
    return target


def _bookkeeping_files(lake: Path) -> dict[Path, bytes]:
    """Every file of the tables' logs, of ``_system`` and of ``_checkpoints``, with its bytes."""
    found = {}
    for path in lake.rglob("*"):
        parts = path.relative_to(lake).parts
        if path.is_file() and (
            {"_delta_log", "_checkpoints"} & set(parts) or parts[0] == "_system"
        ):
            found[path] = path.read_bytes()
    return found


def _written(before: dict[Path, bytes], after: dict[Path, bytes]) -> dict[Path, bytes]:
    return {path: data for path, data in after.items() if before.get(path) != data}


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
    files_before = _bookkeeping_files(lake)

    # Cut short after silver's events are gone and before bronze's; the next run finishes it.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MEDALLION_FAIL_AT", "erasure:silver_events")
        with pytest.raises(InjectedFault):
            erase_subject(spark, config, shopper)
    result = erase_subject(spark, config, shopper)
    assert result.erasure_id == 1
    # No log, checkpoint or bookkeeping file the erasure wrote or changed holds the id (a
    # DELETE's predicate would put it in every commit), nor any file of the lake the key.
    written = _written(files_before, _bookkeeping_files(lake))
    assert any("_delta_log" in str(p) for p in written) and any(
        "_system" in str(p) for p in written
    )
    assert [p for p, data in written.items() if shopper.encode() in data] == []
    key = os.environ["MEDALLION_ERASURE_KEY"].encode()
    assert [p for p in lake.rglob("*") if p.is_file() and key in p.read_bytes()] == []
    # A checkpoint after the erasure lets log cleanup drop the commits before it in time.
    assert (lake / "silver" / "events" / "_delta_log" / "_last_checkpoint").exists()

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
    resent = 0
    for dataset in ("events", "customers"):
        theirs = _theirs(landing, dataset, shopper)
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
        resent = 0
        for dataset in ("transactions", "accounts"):
            theirs = _theirs(landing, dataset, account)
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


def _commits(lake: Path) -> dict[str, int]:
    """How many files each table's log holds (a commit adds some)."""
    logs = lake.rglob("_delta_log")
    return {str(p.relative_to(lake)): sum(1 for _ in p.iterdir()) for p in logs if p.is_dir()}


def _dropped_lines(spark, config: Config) -> int:
    """The landed lines the erasure log counts as dropped, in all."""
    logged = read_table(spark, erasures_table(config)).where("action = 'dropped'").collect()
    return sum(r.rows for r in logged)


def _erased_under_the_old_salt(spark, config: Config, subject: str) -> None:
    """What an erasure before the key wrote: the salt in the lake, and the salted hash of the
    id as a JSON string in its started row (erasure 1)."""
    salt = "legacy-salt"
    salt_table = config.system_table("erasure_salt")
    create_delta_table(spark, salt_table, "salt STRING, created_at TIMESTAMP", {})
    append_rows(
        spark,
        salt_table,
        [{"salt": salt, "created_at": datetime.now(timezone.utc)}],
        "salt STRING, created_at TIMESTAMP",
    )
    log = erasures_table(config)
    create_delta_table(spark, log, ERASURES_SCHEMA, {})
    legacy = legacy_salted_hash(json.dumps(subject), salt)
    rows = [
        {
            "erasure_id": 1,
            "subject_hash": legacy_salted_hash(subject, salt),
            "pipeline": "",
            "table_key": "",
            "action": action,
            "rows": None,
            "version": None,
            "detail": legacy if action == "started" else None,
            "recorded_at": datetime.now(timezone.utc),
        }
        for action in ("started", "finished")
    ]
    append_rows(spark, log, rows, ERASURES_SCHEMA)


def test_only_a_subjects_id_is_erased_and_a_request_carries_no_id(
    spark, reference_lake, tmp_path, capsys, monkeypatch
):
    """Also a lake erased under the old salted scheme (one copy of the reference lake serves
    both): it keeps dropping that subject's lines, beside a new keyed erasure."""
    landing, lake = copy_lake(reference_lake, tmp_path / "copy")
    config = Config(landing=str(landing), lake=str(lake), pipelines=("retail",))
    erase = ["erase", "--lake", str(lake), "--pipeline", "retail"]
    # An erasure made before the key, whose subject's line lands again with a third
    # delivery (so that the lake is built by three): it is dropped before bronze.
    legacy_subject = "c-erased-long-ago"
    _erased_under_the_old_salt(spark, config, legacy_subject)
    legacy_line = json.dumps(
        {"customer_id": legacy_subject, "operation": "INSERT", "updated_at": "2026-11-02T00:00:00Z"}
    )
    (landing / "customers" / "again.json").write_text(legacy_line + "\n")
    generate_input(str(landing), ["retail"], records=200, files=1, seed=31)
    run_available_now(spark, config)
    assert not [r for r in rows_of(config, "bronze/customers") if legacy_subject in r["_raw"]]
    assert _dropped_lines(spark, config) == 1
    commits = _commits(lake)

    # A country, a product: values that no subject column or field holds are refused, with
    # nothing written, whether or not lines hold them in other fields.
    country = _customer_lines(landing)[0]["country"]
    for value in (country, "p-not-a-subject"):
        capsys.readouterr()
        assert main([*erase, "--subject", value]) == 2
        assert main([*erase, "--subject", value, "--dry-run"]) == 2
        refusal = capsys.readouterr().err
        assert "nothing to erase" in refusal and value not in refusal
    assert _commits(lake) == commits

    # Without the key, or under another one, an erasure is refused before anything is read.
    with monkeypatch.context() as patch:
        patch.delenv("MEDALLION_ERASURE_KEY")
        assert main([*erase, "--subject", "c00001"]) == 2
        assert "secrets.token_urlsafe" in capsys.readouterr().err
    assert _commits(lake) == commits

    # A request records the keyed hash, never the id; the job (here --pending) carries it out.
    customer = _any_customer(landing)
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{customer}\n"))
    assert main([*erase, "--subject", "-", "--request", "--output", "json"]) == 0
    request_id = json.loads(capsys.readouterr().out)["request_id"]
    requests = (lake / "_system" / "erasure_requests").rglob("*")
    assert not [p for p in requests if p.is_file() and customer.encode() in p.read_bytes()]
    assert [r["request_id"] for r in pending_requests(spark, config)] == [request_id]
    (result,) = erase_requested(spark, config, request_id)
    # Erasure 2: the salted one was 1.
    assert result.erasure_id == 2 and sum(t.rows for t in result.tables) > 0
    assert pending_requests(spark, config) == []
    oracle = _without(landing, tmp_path / "oracle", customer)
    (oracle / "customers" / "again.json").unlink()  # the salted erasure's subject's line
    assert_customers_match(spark, config, expected_customers(oracle))
    assert_lake_matches(spark, config, expected_from(oracle))

    # The lake has erasures now: a run without the key, or under another, is refused rather
    # than letting the erased subject's lines in again.
    for key in (None, "another-key-of-thirty-two-characters!"):
        with monkeypatch.context() as patch:
            if key is None:
                patch.delenv("MEDALLION_ERASURE_KEY")
            else:
                patch.setenv("MEDALLION_ERASURE_KEY", key)
            with pytest.raises((ConfigError, PipelineError), match="erasure"):
                run_available_now(spark, config)

    # An id whose data has not arrived: refused, or recorded as a suppression alone with the
    # flag; its lines that land later are dropped.
    newcomer = "c-arrives-later"
    assert main([*erase, "--subject", newcomer]) == 2
    capsys.readouterr()
    assert main([*erase, "--subject", newcomer, "--suppress-if-absent"]) == 0
    assert "nothing was found to erase" in capsys.readouterr().out
    line = {"customer_id": newcomer, "operation": "INSERT", "updated_at": "2026-11-02T00:00:00Z"}
    (landing / "customers" / "later.json").write_text(json.dumps(line) + "\n")
    # Beside it, the keyed erasure's and the salted erasure's lines landed again: both erasures
    # keep dropping their subjects' lines.
    again = [*_theirs(landing, "customers", customer), legacy_line]
    (landing / "customers" / "both.json").write_text("".join(f"{x}\n" for x in again))
    bronze_before = len(rows_of(config, "bronze/customers"))
    assert _dropped_lines(spark, config) == 1  # the salted erasure's line, by the third run
    run_available_now(spark, config)
    bronze = rows_of(config, "bronze/customers")
    assert not [r for r in bronze if newcomer in r["_raw"] or legacy_subject in r["_raw"]]
    assert len(bronze) == bronze_before
    assert _dropped_lines(spark, config) == 1 + 1 + len(again) > 3


def _customer_lines(landing: Path) -> list[dict]:
    """The landed customer changes that parse and name a customer and a country."""
    records = []
    for path in sorted((landing / "customers").iterdir()):
        for line in read_file_lines(path):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            named = isinstance(record, dict) and isinstance(record.get("customer_id"), str)
            if named and isinstance(record.get("country"), str):
                records.append(record)
    return records


def _any_customer(landing: Path) -> str:
    """The customer with the fewest landed change lines (a quick erasure)."""
    counts = Counter(r["customer_id"] for r in _customer_lines(landing))
    return min(counts, key=lambda c: (counts[c], c))
