"""The whole pipeline on generated data with every fault, checked against the oracle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lake_checks import assert_customers_match, assert_lake_matches, lake_snapshot, rows_of
from oracle import expected_customers, expected_from

from medallion.config import Config
from medallion.generate import FaultRates, write_file_atomically
from medallion.pipelines.retail.generator import generate
from medallion.streams.runner import run_available_now
from medallion.tables import read_table

pytestmark = pytest.mark.slow  # left out of make test-fast (docs/testing.md)

HOSTILE_LINES = [
    '{"event_id": "h1", "event_type": "view", "user_id": "u1", "product_id": "p1", "event_timestamp": "2026-11-20T13:45:12Z"}',
    '{"event_id": "h2", "event_type": "purchase", "user_id": "u1", "product_id": "p1", "revenue": 12.5, "event_timestamp": "2026-11-20T13:45:12.120Z"}',
    '{"event_id": "h3", "event_type": "purchase", "user_id": "u2", "product_id": "p1", "revenue": "12.50", "event_timestamp": "2026-11-20T13:45:12Z"}',
    '{"event_id": "h4", "event_type": "view", "user_id": "u2", "product_id": "p1", "event_timestamp": "2026-11-20T13:45:12"}',
    '{"event_id": "h5", "event_type": "refund", "user_id": "u2", "product_id": "p1", "event_timestamp": "2026-11-20T13:45:12Z"}',
    '{"event_id": "h6", "event_type": "view", "product_id": "p1", "event_timestamp": "2026-11-20T13:45:12Z"}',
    '{"event_id": "h7", "event_type": "view", "user_id": "u3", "product_id": "p2", "event_timestamp": "2026-11-20T13:45:12.123456+05:30", "extra": {"a": [1, 2]}}',
    '{"event_id": "h8", "event_type": "view", "user_id": "u3"',
    "[1, 2, 3]",
    '"just a string"',
    "   ",
    '{"event_id": "h9", "event_type": "purchase", "user_id": "u4", "product_id": "p2", "event_timestamp": "2026-11-20T13:45:12Z"}',
    '{"event_id": "h10", "event_type": "purchase", "user_id": "u4", "product_id": "p2", "revenue": -1, "event_timestamp": "2026-11-20T13:45:12Z"}',
    '{"event_id": "h1", "event_type": "view", "user_id": "u1", "product_id": "p1", "event_timestamp": "2026-11-20T13:45:12Z"}',
    '\ufeff{"event_id": "h11", "event_type": "add_to_cart", "user_id": "u5", "product_id": "p3", "event_timestamp": "2026-11-19T23:59:59.999999999Z"}',
    '{"event_id": "h12", "event_type": "view", "event_id": "dup", "user_id": "u5", "product_id": "p3", "event_timestamp": "2026-11-19T23:00:00Z"}',
    '{"event_id": "h13", "event_type": "view", "user_id": "u5", "product_id": "p3", "event_timestamp": "2026-11-19T23:00:00Z", "revenue": NaN}',
    '{"event_id": "h14", "event_type": "purchase", "user_id": "u6", "product_id": "p3", "event_timestamp": "2026-11-19T23:00:00Z", "revenue": 1.23456}',
    '{"event_id": "", "event_type": "view", "user_id": "u6", "product_id": "p3", "event_timestamp": "2026-11-19T23:00:00Z"}',
]


def test_generated_data_with_every_fault_matches_the_oracle(spark, dirs):
    landing, lake = dirs
    # Three files a micro-batch, so re-sent copies (a third of them altered) and tied customer
    # changes arrive in the same file, in another file of the same batch and in a later batch.
    config = Config(landing=str(landing), lake=str(lake), max_files_per_trigger=3)
    faults = FaultRates(altered_duplicate=0.3)
    generate(str(landing), events=1500, customers=100, files=4, seed=3, faults=faults)
    write_file_atomically(str(landing / "events"), "hostile.json", HOSTILE_LINES, crlf=True)
    # Temp files of writers that have not renamed yet: never read (the oracle skips them too).
    for hidden in (".part.json.tmp", "_incomplete.json"):
        (landing / "events" / hidden).write_text(HOSTILE_LINES[0] + "\n")
    report = run_available_now(spark, config)
    assert report.batches["bronze_events"] >= 2
    expected = expected_from(landing)
    assert_lake_matches(spark, config, expected)
    assert_customers_match(spark, config, expected_customers(landing))
    assert (
        read_table(spark, config.table("bronze/events"))
        .where("_source_file LIKE '%/.%' OR _source_file LIKE '%/\\_%'")
        .count()
        == 0
    )
    # The tables are also registered by name for notebooks.
    assert spark.table("medallion.silver_events").count() == len(expected.silver)
    assert spark.table("medallion.gold_hourly_product_metrics").count() == len(expected.gold)
    assert report.table("bronze/events").rows_out == expected.bronze_lines
    assert report.table("silver/events").quarantined == len(expected.quarantined)
    assert report.table("silver/events").total_rows == len(expected.silver)

    # Nothing new has landed: a second run writes nothing and changes nothing.
    before = lake_snapshot(spark, config)
    again = run_available_now(spark, config)
    assert all(t.rows_out == 0 for t in again.tables)
    assert lake_snapshot(spark, config) == before

    # Bronze is compared line by line, not only counted: one line altered in place (the row
    # count unchanged) is reported with the line it has and the line it lacks.
    bronze = config.table("bronze/events").sql_name
    spark.sql(f"ALTER TABLE {bronze} SET TBLPROPERTIES ('delta.appendOnly' = 'false')")
    spark.sql(f"UPDATE {bronze} SET _raw = concat(_raw, ' ') WHERE event_id = 'h2'")
    assert len(rows_of(config, "bronze/events")) == expected.bronze_lines
    with pytest.raises(AssertionError, match=r'bronze/events: .* 1 extra, .*"h2".* 1 missing'):
        assert_lake_matches(spark, config, expected)


def _objects(lines: list[str]) -> list[dict]:
    """The lines that are JSON objects, parsed (malformed and blank lines skipped)."""
    out = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return out


def test_reruns_process_only_new_files_and_late_events_update_their_windows(spark, config, dirs):
    landing, _ = dirs
    faults = FaultRates(late=0.0)
    generate(str(landing), events=400, customers=50, files=2, seed=11, faults=faults)
    run_available_now(spark, config)
    bronze_before = len(rows_of(config, "bronze/events"))

    # A second delivery: very late events (a year back), and re-sent copies of old events.
    old_lines = (
        Path(sorted((landing / "events").glob("events-11-0000*.json"))[0]).read_text().splitlines()
    )
    late = [
        '{"event_id": "late-1", "event_type": "purchase", "user_id": "c00001", "product_id": "p0001", "revenue": 10, "event_timestamp": "2025-11-20T10:15:00Z"}',
        '{"event_id": "late-2", "event_type": "view", "user_id": "c00002", "product_id": "p0001", "event_timestamp": "2025-11-20T10:59:59.999+00:00"}',
    ]
    # Re-sent copies that differ from the first arrival (another product): silver keeps the
    # first, so gold does not move either.
    altered = [
        json.dumps({**record, "product_id": "p9999"}) for record in _objects(old_lines[50:70])
    ]
    resent = late + old_lines[:50] + altered
    write_file_atomically(str(landing / "events"), "second.json", resent)
    report = run_available_now(spark, config)
    assert report.table("bronze/events").rows_out == len([x for x in resent if x.strip()])
    assert (
        len(rows_of(config, "bronze/events"))
        == bronze_before + report.table("bronze/events").rows_out
    )
    assert_lake_matches(spark, config, expected_from(landing))
    assert (
        read_table(spark, config.table("silver/events")).where("product_id = 'p9999'").count() == 0
    )
    late_window = (
        read_table(spark, config.table("gold/hourly_product_metrics"))
        .where("product_id = 'p0001' AND window_start = TIMESTAMP '2025-11-20 10:00:00'")
        .collect()
    )
    assert [(r.views, r.purchases, float(r.revenue), r.unique_users) for r in late_window] == [
        (1, 1, 10.0, 2)
    ]
