"""Kafka as the source, against a real local broker (tests/kafka_broker.py) and real Spark.

Every test uses its own topic(s) and lake on the one session-scoped broker. Expected tables
come from the plain-Python oracle: the produced values are written to a landing file and read
by ``oracle.expected_from``, exactly as the file tests do.
"""

from __future__ import annotations

import json
import math
import signal
import uuid
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import pytest
from kafka_broker import KafkaBroker, produce
from lake_checks import assert_customers_match, assert_lake_matches, daily_revenue
from oracle import Expected, expected_customers, expected_daily_revenue, expected_from
from processes import batch_in_flight, committed_batches, kill_group, start_medallion, wait_until

from medallion.bundle.jobs import Bundle
from medallion.config import Config, KafkaSourceOptions
from medallion.generate import generate_customer_lines, generate_event_lines, write_file_atomically
from medallion.layers import TaskParams, run_task
from medallion.streams.flows import flow
from medallion.streams.runner import PipelineError, run_available_now
from medallion.tables import read_table

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

# The event streams; tests about the source itself stop at bronze (or silver), saving minutes.
EVENTS = tuple(
    flow(name) for name in ("bronze_events", "silver_events", "gold_hourly_product_metrics")
)
BRONZE, BRONZE_AND_SILVER = EVENTS[:1], EVENTS[:2]


def _topic(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def _config(lake: Path, bootstrap: str, topic: str, **kafka: object) -> Config:
    options = KafkaSourceOptions(bootstrap_servers=bootstrap, events_topic=topic, **kafka)
    return Config(landing=str(lake), lake=str(lake), source="kafka", kafka=options)


def _events(count: int, seed: int) -> list[str]:
    """Generated event lines with every fault (invalid, malformed, re-sent), blank lines dropped."""
    return [line for line in generate_event_lines(count, seed) if line.strip()]


def _oracle_landing(tmp_path: Path, events: list[str], customers: Sequence[str] = ()) -> Path:
    """A landing folder holding the produced values as one file per dataset, for the oracle."""
    landing = tmp_path / f"oracle-{uuid.uuid4().hex[:6]}"
    write_file_atomically(str(landing / "events"), "produced.json", events)
    if customers:
        write_file_atomically(str(landing / "customers"), "produced.json", list(customers))
    return landing


def _expected(tmp_path: Path, values: list[str]) -> Expected:
    """What the oracle computes for these values, as if they had landed in one file."""
    return expected_from(_oracle_landing(tmp_path, values))


def _bronze_by_position(spark, config: Config) -> dict[tuple[int, int], object]:
    rows = read_table(spark, config.table("bronze/events")).collect()
    positions = {(row._kafka_partition, row._kafka_offset): row for row in rows}
    assert len(positions) == len(rows), "a Kafka record is in bronze twice"
    return positions


def _assert_bronze_is(spark, config: Config, topic: str, produced: dict[tuple[int, int], str]):
    """Bronze holds each produced record exactly once, with its value and Kafka metadata."""
    bronze = _bronze_by_position(spark, config)
    missing, extra = set(produced) - set(bronze), set(bronze) - set(produced)
    assert not missing and not extra, f"missing {sorted(missing)[:5]}, extra {sorted(extra)[:5]}"
    for (partition, offset), row in bronze.items():
        assert row._raw == produced[(partition, offset)]
        assert row._kafka_topic == topic
        assert row._source_file == f"kafka://{topic}/{partition}/{offset}"
        assert row._kafka_timestamp is not None and row._ingested_at is not None


def test_produce_run_then_bronze_silver_and_gold_match_the_oracle(spark, kafka_broker, tmp_path):
    topic = _topic("events")
    kafka_broker.create_topic(topic, partitions=2)
    values = _events(400, seed=61)
    produced = dict(zip(produce(kafka_broker.bootstrap, topic, values), values, strict=True))
    config = _config(tmp_path / "lake", kafka_broker.bootstrap, topic, max_offsets_per_trigger=150)

    report = run_available_now(spark, config, flows=EVENTS)

    _assert_bronze_is(spark, config, topic, produced)
    expected = _expected(tmp_path, values)
    assert_lake_matches(spark, config, expected)
    assert report.table("bronze/events").rows_out == len(values)
    assert report.table("silver/events").quarantined == len(expected.quarantined) > 0
    # maxOffsetsPerTrigger caps every micro-batch, also with the available-now trigger.
    assert report.batches["bronze_events"] >= math.ceil(len(values) / 150)


def _customer_key(line: str) -> str | None:
    """The Kafka key of a change record: its customer_id, so each customer's changes share a
    partition (None for what is not a JSON object with one)."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record.get("customer_id") if isinstance(record, dict) else None


def test_the_bundle_jobs_read_both_topics_with_source_kafka(spark, kafka_broker, tmp_path):
    """The triggered pipeline's job parameters (bundle, local target) with ``source=kafka``: each
    task runs its layer as its notebook does, and the whole lake, customers included, equals
    the oracle's computation over the produced values."""
    events_topic, customers_topic = _topic("events"), _topic("customers")
    kafka_broker.create_topic(events_topic, partitions=2)
    kafka_broker.create_topic(customers_topic, partitions=3)
    events = _events(150, seed=91)
    changes = [line for line in generate_customer_lines(25, seed=92) if line.strip()]
    produce(kafka_broker.bootstrap, events_topic, events)
    produce(
        kafka_broker.bootstrap, customers_topic, changes, keys=list(map(_customer_key, changes))
    )
    lake = tmp_path / "lake"
    kafka = {
        "source": "kafka",
        "kafka_bootstrap": kafka_broker.bootstrap,
        "events_topic": events_topic,
        "customers_topic": customers_topic,
        "max_offsets_per_trigger": "100",
    }
    places = {"landing": str(tmp_path / "landing"), "lake": str(lake)}
    job = Bundle(ROOT).jobs("local", overrides={**places, **kafka})["medallion_pipeline"]
    params = TaskParams.from_mapping(job.parameters)
    assert params.config().kafka.secret_scope is None  # locally: MEDALLION_KAFKA_* variables

    reports = {t.key: run_task(params, layer=t.key, spark=spark) for t in job.task_order()}

    assert reports["bronze"].batches["bronze_events"] >= 2  # maxOffsetsPerTrigger=100
    config = params.config()
    landing = _oracle_landing(tmp_path, events, changes)
    expected = expected_from(landing)
    assert_lake_matches(spark, config, expected)
    customers = expected_customers(landing)
    assert_customers_match(spark, config, customers)
    countries = {cid: c["country"] for cid, c in customers.state.items()}
    assert daily_revenue(spark, config) == expected_daily_revenue(expected.silver, countries)


def test_sigkill_mid_batch_then_rerun_is_exactly_once(spark, kafka_broker, tmp_path):
    topic, customers = _topic("events"), _topic("customers")
    kafka_broker.create_topic(topic, partitions=2)
    kafka_broker.create_topic(customers)
    lake = tmp_path / "lake"
    first = _events(200, seed=71)
    produced = dict(zip(produce(kafka_broker.bootstrap, topic, first), first, strict=True))
    checkpoint = lake / "_checkpoints" / "bronze_events"
    log = tmp_path / "stream.log"
    process = start_medallion(
        "run", "--source", "kafka", "--kafka-bootstrap", kafka_broker.bootstrap,
        "--events-topic", topic, "--customers-topic", customers,
        "--lake", str(lake), "--stream", "--interval", "0.5",
        "--max-offsets-per-trigger", "50",
        log_path=log,
    )  # fmt: skip
    try:
        assert wait_until(lambda: committed_batches(checkpoint) >= 1, timeout=240), log.read_text()[
            -3000:
        ]
        # Produce more while the stream runs, then kill it while a bronze batch is planned (its
        # offsets are in the checkpoint) but not committed.
        more = _events(300, seed=72) + first[:20]  # with re-sent copies of earlier events
        produced.update(zip(produce(kafka_broker.bootstrap, topic, more), more, strict=True))
        assert wait_until(lambda: batch_in_flight(checkpoint), timeout=120), log.read_text()[-3000:]
    finally:
        kill_group(process)
    assert process.returncode == -signal.SIGKILL
    config = _config(lake, kafka_broker.bootstrap, topic)
    assert len(_bronze_by_position(spark, config)) < len(produced), "killed after the last batch"

    # The rerun replays the planned batch with its recorded offsets, then reads the rest.
    run_available_now(spark, config, flows=EVENTS)

    assert read_table(spark, config.table("bronze/events")).count() == len(produced)
    _assert_bronze_is(spark, config, topic, produced)
    assert_lake_matches(spark, config, _expected(tmp_path, first + more))


def test_malformed_records_are_quarantined_with_their_raw_value(spark, kafka_broker, tmp_path):
    topic = _topic("events")
    kafka_broker.create_topic(topic, partitions=1)
    valid = (
        '{"event_id": "k1", "event_type": "view", "user_id": "u1", "product_id": "p1", '
        '"event_timestamp": "2026-11-20T13:45:12Z"}'
    )
    bad = [
        "not json at all",
        '{"event_id": "k2", "event_type": "view", "user_id": "u1"',
        "[1, 2, 3]",
        '{"event_id": "k3", "event_type": "view"}}',
        '{"event_id": "k4", "event_type": "refund", "user_id": "u1", "product_id": "p1", '
        '"event_timestamp": "2026-11-20T13:45:12Z"}',
        "\ufeff{not json}",
    ]
    values: list[str | bytes | None] = [valid, *bad, "", None, b'\xff{"event_id": "k5"}']
    positions = produce(kafka_broker.bootstrap, topic, values)
    config = _config(tmp_path / "lake", kafka_broker.bootstrap, topic)

    run_available_now(spark, config, flows=BRONZE_AND_SILVER)

    # Values are decoded as UTF-8 (invalid bytes become U+FFFD). Empty values and tombstones
    # (NULL values) are not records, like blank lines in files.
    invalid_utf8 = b'\xff{"event_id": "k5"}'.decode("utf-8", errors="replace")
    texts = [v.decode("utf-8", errors="replace") if isinstance(v, bytes) else v for v in values]
    offsets = {text: offset for (_, offset), text in zip(positions, texts, strict=True) if text}
    bronze = read_table(spark, config.table("bronze/events")).collect()
    assert sorted(row._raw for row in bronze) == sorted([valid, *bad, invalid_utf8])
    quarantine = read_table(spark, config.table("silver/events_quarantine")).collect()
    assert sorted(row._raw for row in quarantine) == sorted([*bad, invalid_utf8])
    for row in quarantine:
        assert row.reason, row._raw
        assert row._source_file == f"kafka://{topic}/0/{offsets[row._raw]}"
    silver = read_table(spark, config.table("silver/events")).collect()
    assert [(row.event_id, row._source_file) for row in silver] == [("k1", f"kafka://{topic}/0/0")]


def test_each_partition_is_read_in_offset_order_across_micro_batches(spark, kafka_broker, tmp_path):
    """Records of one key go to one partition; bronze keeps them complete and in offset order.

    This is what applying customer changes in order relies on: per partition, the offsets in
    bronze are exactly those produced, each with its own value, and no record is ingested in an
    earlier micro-batch than a record before it in the same partition.
    """
    topic = _topic("changes")
    kafka_broker.create_topic(topic, partitions=3)
    keys = [f"c{n % 12:05d}" for n in range(360)]
    sequence: dict[str, int] = defaultdict(int)
    values = []
    for n, key in enumerate(keys):
        sequence[key] += 1
        values.append(
            f'{{"event_id": "{key}-{sequence[key]:04d}", "event_type": "view", "user_id": "{key}", '
            f'"product_id": "p{n % 5}", "event_timestamp": "2026-11-20T10:{n % 60:02d}:00Z"}}'
        )
    positions = produce(kafka_broker.bootstrap, topic, values, keys=keys)
    config = _config(tmp_path / "lake", kafka_broker.bootstrap, topic, max_offsets_per_trigger=60)

    report = run_available_now(spark, config, flows=BRONZE)
    assert report.batches["bronze_events"] >= 6

    bronze = _bronze_by_position(spark, config)
    produced = dict(zip(positions, values, strict=True))
    assert {p for p, _ in produced} == {0, 1, 2}, "the keys should spread over every partition"
    for partition in (0, 1, 2):
        offsets = sorted(o for p, o in bronze if p == partition)
        assert offsets == sorted(o for p, o in produced if p == partition)
        assert offsets == list(range(len(offsets))), f"partition {partition} has gaps"
        rows = [bronze[(partition, o)] for o in offsets]
        assert [row._raw for row in rows] == [produced[(partition, o)] for o in offsets]
        ingested = [row._ingested_at for row in rows]
        assert ingested == sorted(ingested), f"partition {partition} was read out of order"
    for key in set(keys):
        rows = sorted((r for r in bronze.values() if r.user_id == key), key=_offset)
        assert len({r._kafka_partition for r in rows}) == 1, f"key {key} spans partitions"
        assert [r.event_id for r in rows] == sorted(r.event_id for r in rows)
    assert len({row._ingested_at for row in bronze.values()}) >= 2


def _offset(row) -> int:
    return row._kafka_offset


def test_sasl_credentials_come_from_the_environment(spark, tmp_path, monkeypatch):
    """A broker that demands SASL/PLAIN: the credentials reach Spark only through env variables."""
    with KafkaBroker(tmp_path / "sasl-broker", sasl_users={"medallion": 's3cret "pw"'}) as broker:
        topic = _topic("events")
        broker.create_topic(topic)
        values = _events(50, seed=81)
        produce(broker.client_config(), topic, values)
        config = _config(tmp_path / "lake", broker.bootstrap, topic)
        monkeypatch.setenv("MEDALLION_KAFKA_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
        monkeypatch.setenv("MEDALLION_KAFKA_SASL_MECHANISM", "PLAIN")
        monkeypatch.setenv("MEDALLION_KAFKA_USERNAME", "medallion")

        monkeypatch.setenv("MEDALLION_KAFKA_PASSWORD", "not-the-password-9f3")
        with pytest.raises(PipelineError, match="bronze_events") as failure:
            run_available_now(spark, config, flows=BRONZE)
        assert "not-the-password-9f3" not in str(failure.value)

        monkeypatch.setenv("MEDALLION_KAFKA_PASSWORD", 's3cret "pw"')
        run_available_now(spark, config, flows=BRONZE)
        assert read_table(spark, config.table("bronze/events")).count() == len(values)
