"""The IoT pipeline (the tutorial) against a plain-Python oracle: silver once per (device,
timestamp), the quarantine, each device's latest reading and exact per-minute metrics, with
re-sent copies, late readings of any age and replayed batches."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from iot_oracle import expected_from, parse
from lake_checks import assert_iot_matches, iot_silver, rows_of

from medallion.config import Config
from medallion.generate import FaultRates, write_file_atomically
from medallion.pipelines import pipelines
from medallion.pipelines.iot.generator import DATASET, reading_lines
from medallion.source_options import KafkaSourceOptions
from medallion.streams.flows import flow
from medallion.streams.runner import run_available_now
from medallion.tables import ensure_tables, read_table

pytestmark = pytest.mark.slow  # left out of make test-fast (docs/testing.md)

FAULTS = FaultRates(duplicate=0.1, late=0.1, invalid=0.05, malformed=0.03)


def _iot(landing, lake) -> Config:
    return Config(landing=str(landing), lake=str(lake), pipelines=("iot",))


def test_iot_matches_its_oracle_across_deliveries_with_late_and_resent_readings(spark, dirs):
    landing, lake = dirs
    (iot,) = pipelines(["iot"])
    assert iot.generate is not None
    config = _iot(landing, lake)
    first = iot.generate(str(landing), records=500, files=2, seed=5, faults=FAULTS)
    report = run_available_now(spark, config)
    assert {t.table for t in report.tables} == {t.key for t in iot.tables}
    assert_iot_matches(spark, config, expected_from(landing))

    # A second delivery, hours later, with late readings up to three days old, and copies of
    # readings already in silver: one re-sent as it was, one with other values (the first
    # copy to arrive stays).
    iot.generate(str(landing), records=400, files=2, seed=6, faults=FAULTS)
    old = Path(first["device_readings"][0]).read_text().split("\n")
    valid = [json.loads(line) for line in old if line and parse(line) is not None]
    altered = dict(valid[0], temperature=99.5)
    resent = [json.dumps(valid[1]), json.dumps(altered)]
    write_file_atomically(str(landing / "device_readings"), "readings-9-resent.json", resent)
    run_available_now(spark, config)
    assert_iot_matches(spark, config, expected_from(landing))
    key = (valid[0]["device_id"],)
    assert all(
        v[0] != Decimal("99.5") for k, v in iot_silver(spark, config).items() if k[:1] == key
    )


def test_a_replayed_batch_writes_nothing_twice(spark, dirs):
    landing, lake = dirs
    config = _iot(landing, lake)
    ensure_tables(spark, config)
    lines = [
        {
            "device_id": "d1",
            "reading_timestamp": "2026-11-25T10:00:05Z",
            "temperature": 20.5,
            "humidity": 40,
            "status": "ok",
        },
        {
            "device_id": "d1",
            "reading_timestamp": "2026-11-25T10:00:35Z",
            "temperature": -1.25,
            "humidity": 41.5,
            "status": "warning",
        },
        {
            "device_id": "d1",
            "reading_timestamp": "2026-11-25T10:00:05Z",
            "temperature": 30,
            "humidity": 40,
            "status": "ok",
        },
        {
            "device_id": "d2",
            "reading_timestamp": "2026-11-25T10:00:05+01:00",
            "temperature": 1,
            "humidity": 101,
            "status": "ok",
        },
    ]
    bronze = spark.createDataFrame(
        [(json.dumps(line), f"file:/f{i}", None) for i, line in enumerate(lines)],
        "_raw STRING, _source_file STRING, _ingested_at TIMESTAMP",
    )
    checkpoints = {}
    for name in ("silver", "status", "minutes"):  # each as a query that ran would leave it
        folder = lake / "_checkpoints" / name
        folder.mkdir(parents=True)
        (folder / "metadata").write_text(json.dumps({"id": f"query-{name}"}))
        checkpoints[name] = str(folder)
    for _attempt in range(2):  # the same batch id twice, by a new process: a replay after a crash
        flow("silver_device_readings").batch_function(config, checkpoints["silver"])(bronze, 0)
    silver = read_table(spark, config.table("silver/device_readings"))
    assert silver.count() == 2
    assert (
        read_table(spark, config.table("silver/device_readings_quarantine"))
        .collect()[0]["reason"]
        .startswith("humidity is outside 0..100")
    )
    for _attempt in range(2):
        flow("gold_device_status").batch_function(config, checkpoints["status"])(silver, 0)
        minutes = flow("gold_device_minute_metrics")
        minutes.batch_function(config, checkpoints["minutes"])(silver, 0)
    (minute,) = rows_of(config, "gold/device_minute_metrics")
    assert (minute.readings, minute.temperature_sum, minute.temperature_min) == (
        2,
        Decimal("19.2500"),
        Decimal("-1.2500"),
    )
    assert minute.temperature_avg == 19.25 / 2
    (status,) = rows_of(config, "gold/device_status")
    assert (status.status, status.temperature) == ("warning", Decimal("-1.2500"))


@pytest.mark.kafka
def test_iot_from_its_topic_matches_its_oracle(spark, kafka_broker, tmp_path):
    """With ``--source kafka`` the IoT pipeline reads the topic of its dataset's name."""
    from kafka_broker import produce

    kafka_broker.create_topic(DATASET, partitions=2)
    lines = reading_lines(300, seed=8, faults=FAULTS)
    produce(kafka_broker.bootstrap, DATASET, lines)
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    # What the oracle reads: the same lines, in the order they were produced. Re-sent copies
    # are byte for byte, so which copy arrives first changes nothing.
    write_file_atomically(str(landing / DATASET), "produced.json", lines)
    config = Config(
        landing=str(lake),
        lake=str(lake),
        source="kafka",
        kafka=KafkaSourceOptions(bootstrap_servers=kafka_broker.bootstrap),
        pipelines=("iot",),
    )
    run_available_now(spark, config)
    assert len(rows_of(config, "bronze/device_readings")) == len(lines)
    assert_iot_matches(spark, config, expected_from(landing))
