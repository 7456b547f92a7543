"""Customer changes: sequence-aware MERGE, tombstones, the CDF audit trail and enriched revenue."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from history_oracle import expected_revenue_at_purchase, landed_changes
from lake_checks import (
    assert_change_feed_audited,
    assert_customers_match,
    assert_lake_matches,
    daily_revenue,
    rows_of,
)
from oracle import expected_customers, expected_from
from pyspark.sql import functions as F

from medallion.changes import ChangeFeedError, read_changes
from medallion.delta_log import committed_version
from medallion.generate import FaultRates, write_file_atomically
from medallion.pipelines.retail.contract import CUSTOMER_FIELDS
from medallion.pipelines.retail.customers import silver_customers_batch
from medallion.pipelines.retail.generator import generate
from medallion.pipelines.retail.revenue import RevenueAtProcessing
from medallion.streams.flows import flow
from medallion.streams.runner import run_available_now
from medallion.tables import ensure_tables, read_table
from medallion.transforms.bronze import to_bronze

pytestmark = pytest.mark.slow  # left out of make test-fast (docs/testing.md)

# Scenario tests run only the flows they check, which saves minutes on a small machine.
CHANGE_FLOWS = tuple(
    flow(n) for n in ("bronze_customers", "silver_customers", "gold_customer_changes")
)
REVENUE_FLOWS = tuple(
    flow(n)
    for n in (
        "bronze_events",
        "bronze_customers",
        "silver_events",
        "silver_customers",
        "gold_daily_revenue_by_country",
    )
)


def change(cid, op, seq, country="DE", at="2026-11-01T00:00:00Z", **extra):
    record = {
        "customer_id": cid,
        "name": f"n-{cid}",
        "email": f"{cid}@x.org",
        "country": country,
        "segment": "smb",
        "operation": op,
        "sequence_num": seq,
        "updated_at": at,
        **extra,
    }
    return json.dumps(record)


def purchase(eid, user, revenue, ts="2026-11-20T10:00:00Z"):
    return json.dumps(
        {
            "event_id": eid,
            "event_type": "purchase",
            "user_id": user,
            "product_id": "p1",
            "revenue": revenue,
            "event_timestamp": ts,
        }
    )


def land(landing, name, customers=(), events=()):
    if customers:
        write_file_atomically(str(landing / "customers"), f"{name}.json", list(customers))
    if events:
        write_file_atomically(str(landing / "events"), f"{name}.json", list(events))


def test_generated_changes_and_revenue_match_the_oracle(spark, config, dirs):
    landing, _ = dirs
    faults = FaultRates(altered_duplicate=0.3)
    generate(str(landing), events=800, customers=120, files=3, seed=31, faults=faults)
    run_available_now(spark, config)
    events = expected_from(landing)
    customers = expected_customers(landing)
    assert_lake_matches(spark, config, events)
    assert_customers_match(spark, config, customers)
    assert_change_feed_audited(spark, config)
    changes = landed_changes(landing)
    assert daily_revenue(spark, config) == expected_revenue_at_purchase(events.silver, changes)


def test_out_of_order_duplicates_deletes_and_reinserts_across_runs(spark, config, dirs):
    landing, _ = dirs
    same_instant = "2026-11-01T01:00:00+01:00"  # the default updated_at, in another zone
    rounds = [
        # c4's first change is an UPDATE (its INSERT never comes); c1 is re-sent. Ties on
        # (sequence_num, operation, updated_at) in one batch: the greatest content wins, a
        # missing value lowest (c2 stays FR, c3 stays US).
        [
            change("c1", "INSERT", 1),
            change("c1", "INSERT", 1),
            change("c2", "INSERT", 1, "FR"),
            change("c2", "INSERT", 1, None),
            change("c3", "INSERT", 1, "US"),
            change("c3", "INSERT", 1, "AR", at=same_instant),
            change("c4", "UPDATE", 5, "JP"),
            change("c5", "INSERT", 1, "GB"),
        ],
        # Out of order inside one batch; c2 deleted.
        [
            change("c1", "UPDATE", 3, "IN"),
            change("c1", "UPDATE", 2, "FR"),
            change("c2", "DELETE", 2),
            change("c3", "UPDATE", 2, "GB"),
        ],
        # Late, older changes: neither brings c2 back nor overwrites c3; c5 deleted. Ties with
        # what an earlier batch applied: the greater c1 wins (JP), the lesser c3 does not (AA),
        # and a DELETE tied with c2's tombstone changes nothing.
        [
            change("c2", "UPDATE", 1, "ES"),
            change("c3", "UPDATE", 1, "ES"),
            change("c5", "DELETE", 4),
            change("c1", "UPDATE", 3, "JP"),
            change("c3", "UPDATE", 2, "AA"),
            change("c2", "DELETE", 2, "ZZ"),
        ],
        # Re-inserts with higher sequences bring customers back; equal sequence: DELETE wins.
        [
            change("c5", "INSERT", 6, "NL"),
            change("c5", "INSERT", 6, "AA"),
            change("c2", "INSERT", 3, "PT"),
            change("c4", "DELETE", 5),
            change("c3", "INSERT", 2, "CA"),
            change("c1", "UPDATE", 3, "FR", at=same_instant),
        ],
    ]
    for i, lines in enumerate(rounds):
        land(landing, f"round-{i}", customers=lines)
        run_available_now(spark, config, flows=CHANGE_FLOWS)
        assert_customers_match(spark, config, expected_customers(landing))
    state = {r.customer_id: r.country for r in rows_of(config, "silver/customers")}
    assert state == {"c1": "JP", "c2": "PT", "c3": "GB", "c5": "NL"}
    tombstones = config.table("silver/customer_tombstones")
    assert {r.customer_id: r.sequence_num for r in read_table(spark, tombstones).collect()} == {
        "c2": 2,  # kept after the re-insert
        "c4": 5,
        "c5": 4,
    }
    assert_change_feed_audited(spark, config)
    kinds = {r._change_type for r in rows_of(config, "gold/customer_changes")}
    assert kinds == {"insert", "update_preimage", "update_postimage", "delete"}

    # The tombstones are checked exactly: a deleted customer's tombstone lost, or one for a
    # customer never deleted, fails the comparison with the oracle.
    expected = expected_customers(landing)
    spark.sql(f"DELETE FROM {tombstones.sql_name} WHERE customer_id = 'c4'")
    with pytest.raises(AssertionError, match=r"tombstones differs for 1 customers, e.g. c4: None"):
        assert_customers_match(spark, config, expected)
    spark.sql(
        f"INSERT INTO {tombstones.sql_name} "
        "VALUES ('c4', 5, TIMESTAMP '2026-11-01 00:00:00', NULL), "
        "('c1', 3, TIMESTAMP '2026-11-01 00:00:00', NULL)"
    )
    with pytest.raises(
        AssertionError, match=r"differs for 1 customers, e.g. c1: \(3, .*\) != None"
    ):
        assert_customers_match(spark, config, expected)


@pytest.mark.parametrize(
    ("meaning", "expected"),
    [
        # The country at purchase time: every change (1 November) precedes every purchase (20
        # November), so the later batch's changes correct e1 and e2, counted in the first.
        ("at_purchase", {"US": ("11.0000", 2), "unknown": ("13.5000", 3)}),
        # The country as silver/customers knew it when each batch ran.
        (
            "at_processing",
            {
                "DE": ("10.0000", 1),
                "FR": ("5.0000", 1),
                "US": ("1.0000", 1),
                "unknown": ("8.5000", 2),
            },
        ),
    ],
)
def test_purchases_are_enriched_with_known_unknown_and_deleted_customers(
    spark, config, dirs, meaning, expected
):
    landing, _ = dirs
    config = config.with_options(settings={"revenue_country": meaning})
    land(
        landing,
        "r0",
        customers=[change("c1", "INSERT", 1, "DE"), change("c2", "INSERT", 1, "FR")],
        events=[purchase("e1", "c1", 10), purchase("e2", "c2", 5), purchase("e3", "nobody", 1.5)],
    )
    run_available_now(spark, config, flows=REVENUE_FLOWS)
    # c2 is deleted, c1 moves; a re-sent e1 is not counted again.
    land(
        landing,
        "r1",
        customers=[change("c2", "DELETE", 2), change("c1", "UPDATE", 2, "US")],
        events=[purchase("e4", "c2", 7), purchase("e5", "c1", 1), purchase("e1", "c1", 10)],
    )
    run_available_now(spark, config, flows=REVENUE_FLOWS)
    day = read_table(spark, config.table("silver/events")).first().event_date
    assert daily_revenue(spark, config) == {
        (day, country): {"revenue": Decimal(revenue), "purchases": purchases}
        for country, (revenue, purchases) in expected.items()
    }


def _bronze_changes(spark, lines):
    df = spark.createDataFrame([(x, "f") for x in lines], "value string, _source_file string")
    return to_bronze(df.withColumn("_ingested_at", F.current_timestamp()), CUSTOMER_FIELDS)


def _checkpoint(path):
    path.mkdir(parents=True)
    (path / "metadata").write_text('{"id": "q"}')
    return str(path)


def test_a_batch_without_a_delete_writes_no_tombstones_commit(spark, config, tmp_path):
    ensure_tables(spark, config)
    process = silver_customers_batch(config, flow("silver_customers"), _checkpoint(tmp_path / "s"))
    tombstones, customers = (
        config.table(k) for k in ("silver/customer_tombstones", "silver/customers")
    )
    created = committed_version(spark, tombstones)
    changes = [change("c1", "INSERT", 1), change("c2", "INSERT", 1), change("c1", "UPDATE", 2)]
    process(_bronze_changes(spark, [*changes, "oops"]).localCheckpoint(), 0)
    assert committed_version(spark, tombstones) == created
    assert {(r.customer_id, r.sequence_num) for r in read_table(spark, customers).collect()} == {
        ("c1", 2),
        ("c2", 1),
    }
    # An invalid DELETE is quarantined, not recorded; a valid one is.
    process(_bronze_changes(spark, [change("c2", "DELETE", "x")]).localCheckpoint(), 1)
    assert committed_version(spark, tombstones) == created
    process(_bronze_changes(spark, [change("c2", "DELETE", 3)]).localCheckpoint(), 2)
    assert committed_version(spark, tombstones) == created + 1
    assert [r.customer_id for r in read_table(spark, tombstones).collect()] == ["c2"]
    assert [r.customer_id for r in read_table(spark, customers).collect()] == ["c1"]


def test_replayed_customer_and_revenue_batches_change_nothing(spark, config, tmp_path):
    ensure_tables(spark, config)
    process = silver_customers_batch(config, flow("silver_customers"), _checkpoint(tmp_path / "s"))
    batch = _bronze_changes(
        spark, [change("c1", "INSERT", 1), change("c1", "DELETE", 2), "oops"]
    ).localCheckpoint()
    process(batch, 0)
    versions = (
        len(rows_of(config, "silver/customer_tombstones")),
        spark.sql(f"DESCRIBE HISTORY delta.`{config.table('silver/customers').path}`").count(),
    )
    process(batch, 0)
    assert (
        len(rows_of(config, "silver/customer_tombstones")),
        spark.sql(f"DESCRIBE HISTORY delta.`{config.table('silver/customers').path}`").count(),
    ) == versions
    assert len(rows_of(config, "silver/customers_quarantine")) == 1

    revenue = RevenueAtProcessing(
        config, flow("gold_daily_revenue_by_country"), _checkpoint(tmp_path / "g")
    )
    events = spark.createDataFrame(
        [("e1", "purchase", "c9", Decimal("2.5"), __import__("datetime").date(2026, 11, 20))],
        "event_id string, event_type string, user_id string, revenue decimal(18,4), event_date date",
    )
    revenue(events, 0)
    revenue(
        events, 0
    )  # replay after a crash: the MERGE's txnVersion is not newer, so it is skipped
    assert [(r.purchases, r.revenue) for r in rows_of(config, "gold/daily_revenue_by_country")] == [
        (1, Decimal("2.5000"))
    ]


def test_change_feed_reads_by_version_and_timestamp_with_clear_errors(spark, config, dirs):
    landing, _ = dirs
    land(landing, "r0", customers=[change("c1", "INSERT", 1), change("c2", "INSERT", 1)])
    run_available_now(spark, config, flows=CHANGE_FLOWS)
    land(landing, "r1", customers=[change("c1", "UPDATE", 2, "US"), change("c2", "DELETE", 2)])
    run_available_now(spark, config, flows=CHANGE_FLOWS)
    latest = spark.sql(f"DESCRIBE HISTORY delta.`{config.table('silver/customers').path}`").first()
    by_version = read_changes(
        spark, config, "silver/customers", from_version=latest.version, to_version=latest.version
    )
    assert sorted(r._change_type for r in by_version.collect()) == [
        "delete",
        "update_postimage",
        "update_preimage",
    ]
    everything = read_changes(spark, config, "silver/customers", from_version=0)
    assert everything.count() == 5
    since = latest.timestamp.strftime("%Y-%m-%dT%H:%M:%S.%f")
    assert read_changes(spark, config, "silver/customers", from_timestamp=since).count() == 3

    with pytest.raises(ChangeFeedError, match="past the latest commit"):
        read_changes(spark, config, "silver/customers", from_version=latest.version + 1)
    with pytest.raises(ChangeFeedError, match="after the latest commit"):
        read_changes(spark, config, "silver/customers", from_timestamp="2999-01-01T00:00:00Z")
    with pytest.raises(ChangeFeedError, match="not enabled"):
        read_changes(spark, config, "silver/events", from_version=0)
    # A table whose feed was switched on later: reading before that version is refused.
    events = config.table("silver/events").path
    spark.sql(f"ALTER TABLE delta.`{events}` SET TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    enabled_at = spark.sql(f"DESCRIBE HISTORY delta.`{events}`").first().version
    with pytest.raises(ChangeFeedError, match=f"before version {enabled_at}, which enabled"):
        read_changes(spark, config, "silver/events", from_version=0)
    assert read_changes(spark, config, "silver/events", from_version=enabled_at).count() == 0
