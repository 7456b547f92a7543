"""Assertions that compare the tables of a lake with the plain-Python oracle."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone

from deltalake import DeltaTable
from oracle import Expected
from pyspark.sql import Row, SparkSession

from medallion.config import Config
from medallion.deployment import tables_of
from medallion.sql_names import TableRef
from medallion.tables import in_lake, read_table, table_exists

SILVER_FIELDS = (
    "event_id",
    "event_type",
    "user_id",
    "product_id",
    "category",
    "revenue",
    "event_timestamp",
    "event_date",
)
GOLD_FIELDS = ("window_end", "views", "add_to_carts", "purchases", "revenue", "unique_users")


def lake_snapshot(spark, config: Config, change_feeds: bool = True) -> dict:
    """Every table of the lake as plain Python values, for equality checks between runs (the
    tables of the pipelines that have any in the lake), without ingestion times and paths.

    Read with delta-rs, without a Spark job (test_independent_reader.py holds it to Spark's
    reading). ``change_feeds=False`` leaves out tables of Change Data Feed rows, whose rows
    depend on how the input was split into commits.
    """
    tables = {}
    for table in tables_of(in_lake(spark, config)):
        if not table_exists(spark, table):
            continue
        columns, records = _read(table)
        if change_feeds or "_commit_version" not in columns:
            kept = [c for c in columns if c not in ("_ingested_at", "_source_file")]
            tables[table.key] = Counter(tuple(plain_value(r[c]) for c in kept) for r in records)
    return tables


def rows_of(config: Config, key: str) -> list[Row]:
    """The rows of a table of the lake, read by delta-rs without a Spark job, as Spark's
    ``collect`` gives them (test_independent_reader.py holds the two readers equal):
    timestamps naive UTC."""
    _, records = _read(config.table(key))
    return [Row(**{name: _naive(value) for name, value in r.items()}) for r in records]


def _read(table: TableRef) -> tuple[list[str], list[dict]]:
    """(columns, rows as dicts) of a path table: by delta-rs, or by Spark where delta-rs cannot
    open the path (it takes a backslash in a local path for a separator)."""
    if "\\" in table.path:
        frame = read_table(SparkSession.getActiveSession(), table)
        return frame.columns, [row.asDict() for row in frame.collect()]
    arrow = DeltaTable(table.path).to_pyarrow_table()
    return arrow.column_names, arrow.to_pylist()


def _naive(value):
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(timezone.utc).replace(tzinfo=None)
    return value


def plain_value(value):
    """A column value as both Spark and delta-rs readers agree on, and hashable: timestamps as
    naive UTC, arrays (banking's alert reasons) as tuples, structs (a history's changes, a
    Spark Row or a delta-rs dict) as tuples of (field, value)."""
    if isinstance(value, Row):
        value = value.asDict()
    if isinstance(value, dict):
        return tuple((name, plain_value(field)) for name, field in value.items())
    if isinstance(value, list):
        return tuple(map(plain_value, value))
    return _naive(value)


def _shown(lines: Counter) -> str:
    """A few lines of a Counter for a failure message, long ones cut."""
    return "; ".join(
        (repr(line) if len(line) <= 160 else repr(line[:160]) + "...") + f" (x{n})"
        for line, n in list(lines.items())[:3]
    )


def assert_same_lines(table: str, got, want) -> None:
    """The multiset of ``got`` equals that of ``want``; the message shows a few of the lines
    the table has in excess and a few it lacks."""
    got_lines, want_lines = Counter(got), Counter(want)
    if got_lines != want_lines:
        extra, missing = got_lines - want_lines, want_lines - got_lines
        raise AssertionError(
            f"{table}: {sum(got_lines.values())} lines, {sum(want_lines.values())} expected; "
            f"{sum(extra.values())} extra, e.g. [{_shown(extra)}]; "
            f"{sum(missing.values())} missing, e.g. [{_shown(missing)}]"
        )


def assert_bronze_matches(spark, config: Config, table: str, expected) -> None:
    """Bronze holds each landed line once, unchanged: the multiset of ``_raw`` equals the
    oracle's lines (``expected.bronze_raw``), and so does the row count."""
    rows = rows_of(config, table)
    assert_same_lines(table, (row._raw for row in rows), expected.bronze_raw)
    assert len(rows) == expected.bronze_lines == len(expected.bronze_raw)


def assert_lake_matches(spark, config: Config, expected: Expected) -> None:
    """Bronze, silver, quarantine and gold equal the oracle's computation exactly."""
    assert_bronze_matches(spark, config, "bronze/events", expected)
    silver_rows = rows_of(config, "silver/events")
    ids = [row.event_id for row in silver_rows]
    assert len(ids) == len(set(ids)), "silver holds an event_id twice"
    missing, extra = set(expected.silver) - set(ids), set(ids) - set(expected.silver)
    assert not missing and not extra, (
        f"silver lacks {sorted(missing)[:5]}, has extra {sorted(extra)[:5]}"
    )
    for row in silver_rows:
        want = expected.silver[row.event_id]
        got = {name: row[name] for name in SILVER_FIELDS}
        assert got == {name: want[name] for name in SILVER_FIELDS}, row.event_id
    quarantine = rows_of(config, "silver/events_quarantine")
    assert_same_lines(
        "silver/events_quarantine", (r._raw for r in quarantine), expected.quarantined
    )
    assert all(row.reason for row in quarantine)
    gold = rows_of(config, "gold/hourly_product_metrics")
    got_gold = {
        (row.window_start, row.product_id): {f: row[f] for f in GOLD_FIELDS} for row in gold
    }
    assert len(gold) == len(got_gold)
    assert got_gold == expected.gold


def assert_customers_match(spark, config: Config, expected) -> None:
    """bronze/silver/quarantine of customers equal the oracle's computation exactly, and the
    tombstones keep the oracle's rule (``oracle.expected_customers``)."""
    from oracle import CUSTOMER_STATE_FIELDS

    assert_bronze_matches(spark, config, "bronze/customers", expected)
    rows = rows_of(config, "silver/customers")
    got = {row.customer_id: {f: row[f] for f in CUSTOMER_STATE_FIELDS} for row in rows}
    assert len(got) == len(rows), "silver/customers holds a customer twice"
    want = {cid: {f: c[f] for f in CUSTOMER_STATE_FIELDS} for cid, c in expected.state.items()}
    if got != want:
        wrong = sorted(cid for cid in got.keys() | want.keys() if got.get(cid) != want.get(cid))
        raise AssertionError(
            f"silver/customers differs for {len(wrong)} customers, e.g. "
            + "; ".join(f"{cid}: {got.get(cid)} != {want.get(cid)}" for cid in wrong[:3])
        )
    quarantine = rows_of(config, "silver/customers_quarantine")
    assert_same_lines(
        "silver/customers_quarantine", (r._raw for r in quarantine), expected.quarantined
    )
    assert all(r.reason for r in quarantine)
    assert_tombstones_match(spark, config, expected)


def assert_tombstones_match(spark, config: Config, expected) -> None:
    """silver/customer_tombstones holds each deleted customer's newest DELETE, and nothing else
    (``oracle.expected_customers``)."""
    rows = rows_of(config, "silver/customer_tombstones")
    got = {row.customer_id: (row.sequence_num, row.updated_at) for row in rows}
    assert len(got) == len(rows), "silver/customer_tombstones holds a customer twice"
    if got != expected.tombstones:
        wrong = sorted(
            cid
            for cid in got.keys() | expected.tombstones.keys()
            if got.get(cid) != expected.tombstones.get(cid)
        )
        raise AssertionError(
            f"silver/customer_tombstones differs for {len(wrong)} customers, e.g. "
            + "; ".join(f"{c}: {got.get(c)} != {expected.tombstones.get(c)}" for c in wrong[:3])
        )


def assert_change_feed_audited(spark, config: Config) -> None:
    """gold/customer_changes holds every change of silver/customers' feed, exactly once."""
    silver = config.table("silver/customers")
    feed = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 0)
        .load(silver.path)
    )
    audit = read_table(spark, config.table("gold/customer_changes"))
    assert Counter(tuple(r) for r in audit.collect()) == Counter(
        tuple(r) for r in feed.select(*audit.columns).collect()
    )


def daily_revenue(spark, config: Config) -> dict:
    rows = rows_of(config, "gold/daily_revenue_by_country")
    return {
        (r.event_date, r.country): {"revenue": r.revenue, "purchases": r.purchases} for r in rows
    }


def assert_banking_matches(spark, config: Config, expected) -> None:
    """The banking tables equal the oracle's (tests/banking_oracle.py)."""

    def table(key):
        return rows_of(config, key)

    accounts = {r.account_id: r for r in table("silver/accounts")}
    assert set(accounts) == set(expected.accounts)
    for key, want in expected.accounts.items():
        got = accounts[key]
        assert (got.risk_score, got.opened_at, got.avg_transaction_amount, got.country) == (
            want["risk_score"],
            want["opened_at"],
            want["avg_transaction_amount"],
            want["country"],
        ), key
        assert (got.sequence_num, got.operation) == (want["sequence_num"], want["operation"])
    assert len(table("silver/accounts_quarantine")) == expected.quarantined_accounts
    quarantined = table("silver/transactions_quarantine")
    assert len(quarantined) == expected.quarantined_transactions
    assert all(r.reason for r in quarantined)

    silver = {r.transaction_id: r.asDict() for r in table("silver/transactions")}
    assert set(silver) == set(expected.transactions)
    for key, want in expected.transactions.items():
        assert {c: silver[key][c] for c in want} == want, key
    alerts = table("gold/fraud_alerts")
    assert len(alerts) == len({a.transaction_id for a in alerts})  # each alert once
    assert {
        a.transaction_id: (a.account_id, a.amount, a.transaction_timestamp, a.alert_reasons)
        for a in alerts
    } == expected.alerts()
    daily = {
        (r.account_id, r.event_date): (
            r.transactions,
            r.amount,
            r.flagged_transactions,
            r.flagged_amount,
            r.max_amount,
        )
        for r in table("gold/account_daily_activity")
    }
    assert daily == expected.daily_activity()


def iot_silver(spark, config) -> dict:
    rows = rows_of(config, "silver/device_readings")
    return {(r.device_id, r.reading_timestamp): (r.temperature, r.humidity, r.status) for r in rows}


def assert_iot_matches(spark, config: Config, expected) -> None:
    """The IoT tables equal the oracle's (tests/iot_oracle.py)."""
    silver = iot_silver(spark, config)
    want = {
        (k[0], k[1].replace(tzinfo=None)): (v["temperature"], v["humidity"], v["status"])
        for k, v in expected.silver.items()
    }
    assert silver == want
    quarantine = rows_of(config, "silver/device_readings_quarantine")
    assert len(quarantine) == expected.quarantined
    assert all(r.reason for r in quarantine)
    status = {
        r.device_id: (r.reading_timestamp, r.temperature)
        for r in rows_of(config, "gold/device_status")
    }
    assert status == {
        d: (r["reading_timestamp"].replace(tzinfo=None), r["temperature"])
        for d, r in expected.status().items()
    }
    minutes = {
        (r.device_id, r.minute_start): r.asDict()
        for r in rows_of(config, "gold/device_minute_metrics")
    }
    want_minutes = {(k[0], k[1].replace(tzinfo=None)): v for k, v in expected.minutes().items()}
    assert set(minutes) == set(want_minutes)
    for key, row in want_minutes.items():
        got = minutes[key]
        assert {c: got[c] for c in row} == row, key
