"""A MERGE-based stream and a batch job write one table at once: conflicts are retried, and
nothing is lost or applied twice."""

from __future__ import annotations

import datetime as dt
import logging
import threading
from decimal import Decimal

import pytest

from medallion.pipelines.retail.revenue import RevenueAtProcessing
from medallion.streams.flows import flow
from medallion.streams.sinks import merge_into
from medallion.tables import ensure_tables, read_table

pytestmark = pytest.mark.slow  # left out of make test-fast (docs/testing.md)

ROUNDS = 8


def _checkpoint(path):
    path.mkdir(parents=True)
    (path / "metadata").write_text('{"id": "concurrent"}')
    return str(path)


def test_stream_merges_and_batch_upserts_on_one_table_both_land_exactly(
    spark, config, tmp_path, caplog
):
    ensure_tables(spark, config)
    gold = config.table("gold/daily_revenue_by_country")
    stream_batch = RevenueAtProcessing(
        config, flow("gold_daily_revenue_by_country"), _checkpoint(tmp_path / "cp")
    )
    day = dt.date(2026, 11, 20)
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    # Each writer has its own session, as a stream's foreachBatch (Spark clones the session per
    # query) and a separate batch job do: txnAppId/txnVersion are session confs.
    stream_session, job_session = spark.newSession(), spark.newSession()

    def stream_writer():
        start.wait()
        for batch_id in range(ROUNDS):
            purchases = stream_session.createDataFrame(
                [(f"s{batch_id}-{i}", "purchase", "nobody", Decimal("1.5"), day) for i in range(3)],
                "event_id string, event_type string, user_id string, revenue decimal(18,4), event_date date",
            )
            stream_batch(purchases, batch_id)

    def batch_job():
        # A correction job: upserts its own country's rows, the same values every time.
        start.wait()
        for i in range(ROUNDS):
            rows = job_session.createDataFrame(
                [(day + dt.timedelta(days=i), "ZZ", Decimal("10"), 1)],
                "event_date date, country string, revenue decimal(28,4), purchases long",
            )
            clauses = "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
            merge_into(job_session, gold, rows, ["event_date", "country"], clauses)

    def guarded(target):
        def run():
            try:
                target()
            except BaseException as error:  # noqa: BLE001 - reported by the assertion below
                errors.append(error)

        return run

    caplog.set_level(logging.INFO, logger="medallion.conflicts")
    threads = [threading.Thread(target=guarded(t)) for t in (stream_writer, batch_job)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert errors == []

    rows = {
        (r.event_date, r.country): (r.revenue, r.purchases)
        for r in read_table(spark, gold).collect()
    }
    assert rows.pop((day, "unknown")) == (Decimal("1.5") * 3 * ROUNDS, 3 * ROUNDS)
    assert rows == {
        (day + dt.timedelta(days=i), "ZZ"): (Decimal("10.0000"), 1) for i in range(ROUNDS)
    }
    retries = [r for r in caplog.records if "concurrent commit" in r.getMessage()]
    print(f"write conflicts retried: {len(retries)}")
    assert retries, "the writers never collided, so this run proved nothing about conflicts"
