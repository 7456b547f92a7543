"""``medallion quarantine summary`` on the shared reference lake: every quarantine's records, by
reason and by day, against the plain-Python oracles and the rows themselves.

The tests on the reference lake are slow (it is built once per run, for the slow tests that
read it); the rendering test is not."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest
from banking_oracle import Deliveries
from iot_oracle import expected_from as iot_expected
from lake_checks import rows_of
from oracle import expected_customers, expected_from
from pyspark.sql import functions as F

from medallion.cli import main
from medallion.config import Config
from medallion.console import plain, plural
from medallion.ops.quarantine import quarantine_summary, render_summary
from medallion.tables import read_table


@pytest.fixture(scope="module")
def reference(reference_lake):
    return Config(landing=str(reference_lake / "landing"), lake=str(reference_lake / "lake"))


@pytest.mark.slow
def test_each_quarantine_is_counted_as_the_oracles_refuse_and_by_its_own_reasons(
    spark, reference, reference_lake
):
    landing = reference_lake / "landing"
    banking = Deliveries(landing).ran()
    expected = {
        "silver/events_quarantine": len(expected_from(landing).quarantined),
        "silver/customers_quarantine": len(expected_customers(landing).quarantined),
        "silver/transactions_quarantine": banking.quarantined_transactions,
        "silver/accounts_quarantine": banking.quarantined_accounts,
        "silver/device_readings_quarantine": iot_expected(landing).quarantined,
    }

    summaries = {s.table: s for s in quarantine_summary(spark, reference)}

    assert {table: s.records for table, s in summaries.items()} == expected
    assert summaries["silver/events_quarantine"].records > 0
    for table, summary in summaries.items():
        rows = rows_of(reference, table)
        by_reason = Counter(row.reason for row in rows)
        by_day = Counter(row._ingested_at.date() for row in rows)
        assert {c.reason: c.records for c in summary.by_reason} == by_reason, table
        assert [c.records for c in summary.by_reason] == sorted(by_reason.values(), reverse=True)
        assert {c.day: c.records for c in summary.by_day} == by_day, table


@pytest.mark.slow
def test_since_counts_only_what_was_ingested_from_then(spark, reference):
    events = reference.table("silver/events_quarantine")
    times = sorted(r._ingested_at for r in read_table(spark, events).collect())
    later = [t for t in times if t >= times[-1]]

    def records(since: datetime) -> int:
        summaries = quarantine_summary(spark, reference.with_options(pipelines=("retail",)), since)
        return {s.table: s.records for s in summaries}["silver/events_quarantine"]

    assert records(times[0] - timedelta(days=1)) == len(times)
    assert records(times[-1]) == len(later) < len(times)  # the second delivery's only
    assert records(times[-1] + timedelta(days=1)) == 0


@pytest.mark.slow
def test_days_are_utc_days_whatever_the_session_time_zone(spark, reference):
    """A workspace may set ``spark.sql.session.timeZone``: the days stay UTC's."""
    events = reference.table("silver/events_quarantine")
    seconds = read_table(spark, events).select(F.col("_ingested_at").cast("double")).collect()
    utc_days = Counter(datetime.fromtimestamp(s[0], timezone.utc).date() for s in seconds)
    retail = reference.with_options(pipelines=("retail",))
    zone = spark.conf.get("spark.sql.session.timeZone")
    try:
        for far_away in ("Pacific/Kiritimati", "Pacific/Pago_Pago"):  # UTC+14, UTC-11
            spark.conf.set("spark.sql.session.timeZone", far_away)
            summary = {s.table: s for s in quarantine_summary(spark, retail)}[events.key]
            assert {c.day: c.records for c in summary.by_day} == utc_days, far_away
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)


@pytest.mark.slow
def test_the_command_prints_each_table_and_the_same_data_as_json(spark, reference, capsys):
    lake = ["--lake", reference.lake]

    assert main(["quarantine", "summary", *lake, "--pipeline", "iot", "--output", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [s["table"] for s in data] == ["silver/device_readings_quarantine"]
    (iot,) = data
    assert iot["records"] == sum(c["records"] for c in iot["by_reason"]) > 0
    assert iot["records"] == sum(c["records"] for c in iot["by_day"])
    assert all(c["day"] == str(datetime.fromisoformat(c["day"]).date()) for c in iot["by_day"])

    assert main(["quarantine", "summary", *lake, "--pipeline", "retail"]) == 0
    printed = capsys.readouterr().out
    retail = quarantine_summary(spark, reference.with_options(pipelines=("retail",)))
    for summary in retail:
        assert f"{summary.table}: {plural(summary.records, 'record')}" in printed
        assert summary.by_reason[0].reason in printed
    assert "device_readings" not in printed


def test_many_reasons_are_shown_up_to_a_limit_with_the_rest_counted():
    from medallion.ops.quarantine import QuarantineSummary, ReasonCount

    reasons = [ReasonCount(f"unknown event_type: t{n}", 30 - n) for n in range(25)]
    summary = QuarantineSummary("silver/events_quarantine", sum(c.records for c in reasons))
    summary.by_reason.extend(reasons)
    text = plain(render_summary([summary], shown=20))
    assert "unknown event_type: t19" in text and "t20" not in text
    assert f"{sum(c.records for c in reasons[20:])} (5 other reasons)" in " ".join(text.split())
    assert plain(render_summary([])) == "no quarantine table in this lake yet"
