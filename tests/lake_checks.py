"""Assertions that compare the tables of a lake with the plain-Python oracle."""

from __future__ import annotations

from collections import Counter

from oracle import Expected

from medallion.config import Config
from medallion.tables import read_table

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


def lake_snapshot(spark, config: Config) -> dict:
    """Every table of the lake as plain Python values, for equality checks between runs."""
    tables = {}
    for table in config.tables():
        df = read_table(spark, table).drop("_ingested_at", "_source_file")
        tables[table.key] = Counter(tuple(row) for row in df.collect())
    return tables


def assert_lake_matches(spark, config: Config, expected: Expected) -> None:
    """Bronze, silver, quarantine and gold equal the oracle's computation exactly."""
    bronze = read_table(spark, config.table("bronze/events"))
    assert bronze.count() == expected.bronze_lines
    silver_rows = read_table(spark, config.table("silver/events")).collect()
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
    quarantine = read_table(spark, config.table("silver/events_quarantine")).collect()
    got_q, want_q = Counter(row._raw for row in quarantine), Counter(expected.quarantined)
    assert got_q == want_q, (
        f"quarantine extra {list((got_q - want_q).items())[:3]}, lacks {list((want_q - got_q).items())[:3]}"
    )
    assert all(row.reason for row in quarantine)
    gold = read_table(spark, config.table("gold/hourly_product_metrics")).collect()
    got_gold = {
        (row.window_start, row.product_id): {f: row[f] for f in GOLD_FIELDS} for row in gold
    }
    assert len(gold) == len(got_gold)
    assert got_gold == expected.gold


def assert_customers_match(spark, config: Config, expected) -> None:
    """bronze/silver/quarantine of customers equal the oracle's computation exactly."""
    from oracle import CUSTOMER_STATE_FIELDS

    assert read_table(spark, config.table("bronze/customers")).count() == expected.bronze_lines
    rows = read_table(spark, config.table("silver/customers")).collect()
    got = {row.customer_id: {f: row[f] for f in CUSTOMER_STATE_FIELDS} for row in rows}
    assert len(got) == len(rows), "silver/customers holds a customer twice"
    want = {cid: {f: c[f] for f in CUSTOMER_STATE_FIELDS} for cid, c in expected.state.items()}
    assert got == want
    quarantine = read_table(spark, config.table("silver/customers_quarantine")).collect()
    assert Counter(r._raw for r in quarantine) == Counter(expected.quarantined)
    assert all(r.reason for r in quarantine)


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
    rows = read_table(spark, config.table("gold/daily_revenue_by_country")).collect()
    return {
        (r.event_date, r.country): {"revenue": r.revenue, "purchases": r.purchases} for r in rows
    }
