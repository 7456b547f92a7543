"""Schema drift: new input fields, carrying one into silver, and a breaking change to silver."""

from __future__ import annotations

import io
import json
import logging
import time

import pytest
from lake_checks import assert_lake_matches, rows_of
from oracle import expected_from
from processes import committed_batches, wait_until
from rich.console import Console
from stream_thread import StreamInThread

from medallion.console import plain
from medallion.generate import write_file_atomically
from medallion.ops.status import backlog
from medallion.streams.flows import flow
from medallion.streams.live import LiveStreams, render
from medallion.streams.runner import PipelineError, run_available_now
from medallion.tables import read_table

pytestmark = pytest.mark.slow  # left out of make test-fast (docs/testing.md)


def _event(n: int, **extra: object) -> str:
    record = {
        "event_id": f"e{n}",
        "event_type": "view",
        "user_id": f"u{n % 3}",
        "product_id": "p1",
        "event_timestamp": f"2026-11-20T10:{n:02d}:00Z",
        **extra,
    }
    return json.dumps(record)


def test_new_fields_stay_in_bronze_then_carried_into_silver_and_a_breaking_change_stops(
    spark, config, dirs, caplog
):
    landing, lake = dirs
    events = str(landing / "events")
    config = config.with_options(trigger_interval_seconds=0.5)
    streams = (flow("bronze_events"), flow("gold_daily_revenue_by_country"))

    # 1. A running stream takes a file with a new field: no restart, nothing lost; the field
    #    stays in bronze's raw line.
    #    Meanwhile the live table of a terminal (--stream) shows each stream's batches and
    #    backlog: the landed files its checkpoint has not taken, or the versions of its source
    #    not read (both nothing once it caught up; step 3 sees both grow).
    bronze_checkpoint = lake / "_checkpoints" / "bronze_events"
    screen = Console(file=io.StringIO(), force_terminal=True, width=160)
    with LiveStreams(lambda f: backlog(spark, config, f), screen, 0, 0) as live:
        running = StreamInThread(spark, config, streams, watch=live.update).start()
        write_file_atomically(events, "a.json", [_event(1), _event(2)])
        assert wait_until(lambda: committed_batches(bronze_checkpoint) >= 1, timeout=300)
        write_file_atomically(events, "b.json", [_event(3, coupon="SAVE10"), _event(4, coupon=7)])
        assert wait_until(lambda: committed_batches(bronze_checkpoint) >= 2, timeout=300)
        # The revenue stream has read silver to its end (it follows bronze's second batch).
        revenue_stream = flow("gold_daily_revenue_by_country")
        assert wait_until(
            lambda: backlog(spark, config, revenue_stream) == "0 versions", timeout=300
        )
        running.stop()
    rows = {row.stream: row for row in live.rows.values()}
    assert rows["bronze_events"].batches == 2 and rows["bronze_events"].backlog == "0 files"
    assert rows["gold_daily_revenue_by_country"].batches >= 1
    assert rows["gold_daily_revenue_by_country"].backlog == "0 versions"
    drawn = plain(render(list(rows.values())))
    assert drawn.splitlines()[0].split() == [
        "stream",
        "batches",
        "rows/s",
        "in",
        "rows/s",
        "out",
        "backlog",
        "last",
        "batch",
    ]
    assert "\x1b[" in screen.file.getvalue()  # drawn in place, on a terminal
    bronze = read_table(spark, config.table("bronze/events"))
    assert "coupon" not in bronze.columns
    raws = {r.event_id: json.loads(r._raw) for r in bronze.collect()}
    assert raws["e3"]["coupon"] == "SAVE10" and raws["e4"]["coupon"] == 7

    # 2. Opt in: restart with the column carried. Silver's append adds it (schema evolution)
    #    to the events that land from now on; the revenue stream, already reading silver,
    #    stops once on the schema change and is restarted.
    carried = config.with_options(carried_columns={"silver/events": ("coupon",)})
    caplog.set_level(logging.INFO, logger="medallion.streams")
    running = StreamInThread(spark, carried, streams).start()
    assert wait_until(lambda: "starting gold_daily_revenue_by_country" in caplog.text, 300)
    time.sleep(2)  # the revenue stream reads silver with the schema it had
    purchase = _event(5, coupon="SAVE20", event_type="purchase", revenue=9.5)
    write_file_atomically(events, "c.json", [purchase])
    revenue = carried.table("gold/daily_revenue_by_country")
    assert wait_until(lambda: read_table(spark, revenue).count() > 0, timeout=300, interval=2)
    running.stop()
    restarted = "gold_daily_revenue_by_country: its source's schema changed; restarting it"
    assert restarted in caplog.text
    silver = read_table(spark, carried.table("silver/events"))
    coupons = {r.event_id: r.coupon for r in silver.collect()}
    assert coupons == {"e1": None, "e2": None, "e3": None, "e4": None, "e5": "SAVE20"}
    assert_lake_matches(spark, config, expected_from(landing))

    # 3. Someone changes a silver column's type: the events stop before writing anything,
    #    saying how to recover.
    silver_ref = carried.table("silver/events")
    (
        silver.withColumn("revenue", silver["revenue"].cast("string"))
        .write.format("delta")
        .mode("overwrite")
        .option("overwriteSchema", "true")
        .save(silver_ref.path)
    )
    bronze_rows = len(rows_of(carried, "bronze/events"))
    write_file_atomically(events, "d.json", [_event(6, coupon="X")])
    assert backlog(spark, carried, flow("bronze_events")) == "1 file"
    assert backlog(spark, carried, flow("gold_daily_revenue_by_country")) == "1 version"
    with pytest.raises(PipelineError) as failure:
        run_available_now(spark, carried, (flow("bronze_events"),))
    message = str(failure.value)
    assert "stream 'bronze_events'" in message
    assert (
        "breaking schema change in silver/events: column revenue is STRING, "
        "expected DECIMAL(18,4) (type changed)" in message
    )
    assert f"medallion reset --lake {lake} --layer silver --table silver/events --yes" in message
    assert read_table(spark, silver_ref).where("event_id = 'e6'").count() == 0
    assert len(rows_of(carried, "bronze/events")) == bronze_rows
