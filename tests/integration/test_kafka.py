"""Kafka as the source, against a real local broker (tests/kafka_broker.py) and real Spark.

Every test uses its own topic(s) and lake on the one session-scoped broker. Expected tables
come from the plain-Python oracle: the produced values are written to a landing file and read
by ``oracle.expected_from``, exactly as the file tests do.
"""

from __future__ import annotations

import json
import math
import signal
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import pytest
from history_oracle import expected_revenue_at_purchase, landed_changes
from kafka_broker import KafkaBroker, produce
from lake_checks import assert_customers_match, assert_lake_matches, daily_revenue, rows_of
from oracle import Expected, expected_customers, expected_from
from processes import batch_in_flight, committed_batches, kill_group, start_medallion, wait_until

from medallion.bundle.resolve import Bundle
from medallion.config import Config
from medallion.errors import failure_text
from medallion.gaps import checked_through, mark_checked, recorded_gaps
from medallion.generate import write_file_atomically
from medallion.layers import run_task
from medallion.pipelines.retail.generator import generate_customer_lines, generate_event_lines
from medallion.source_options import KafkaSourceOptions
from medallion.streams.flows import flow
from medallion.streams.kafka_gaps import CHECK as KAFKA_GAPS_CHECK
from medallion.streams.kafka_gaps import record_kafka_gaps
from medallion.streams.kafka_loss_hint import kafka_data_loss_hint
from medallion.streams.runner import PipelineError, run_available_now
from medallion.tables import read_table
from medallion.task_params import TaskParams

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
    options = KafkaSourceOptions(bootstrap_servers=bootstrap, topics={"events": topic}, **kafka)
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
    rows = rows_of(config, "bronze/events")
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
    changes = landed_changes(landing)
    assert daily_revenue(spark, config) == expected_revenue_at_purchase(expected.silver, changes)


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

    assert len(rows_of(config, "bronze/events")) == len(produced)
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
    bronze = rows_of(config, "bronze/events")
    assert sorted(row._raw for row in bronze) == sorted([valid, *bad, invalid_utf8])
    quarantine = rows_of(config, "silver/events_quarantine")
    assert sorted(row._raw for row in quarantine) == sorted([*bad, invalid_utf8])
    for row in quarantine:
        assert row.reason, row._raw
        assert row._source_file == f"kafka://{topic}/0/{offsets[row._raw]}"
    silver = rows_of(config, "silver/events")
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
        assert len(rows_of(config, "bronze/events")) == len(values)


# --- Records lost before they were read (docs/kafka.md) ---


def _delete_records_before(broker: KafkaBroker, topic: str, offset: int, partition: int = 0):
    """Delete a partition's records below ``offset`` (Kafka's deleteRecords, as retention
    does): the partition's first offset becomes exactly ``offset``."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({**broker.client_config(), "log_level": 0})
    for future in admin.delete_records([TopicPartition(topic, partition, offset)]).values():
        assert future.result(timeout=60).low_watermark == offset


def _recreate_topic(broker: KafkaBroker, topic: str) -> None:
    """Delete a topic and create it again under the same name (its offsets restart at 0)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({**broker.client_config(), "log_level": 0})
    admin.delete_topics([topic], operation_timeout=60)[topic].result(timeout=60)
    deadline = time.monotonic() + 60
    while True:
        try:
            broker.create_topic(topic)
            return
        except Exception:  # noqa: BLE001 - still being deleted
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _run_and_check(spark, config: Config) -> None:
    """An available-now bronze run between the gap checks the runner makes around it."""
    record_kafka_gaps(spark, config, "bronze_events")
    run_available_now(spark, config, flows=BRONZE)
    record_kafka_gaps(spark, config, "bronze_events")


def _offsets(spark, config: Config) -> list[int]:
    rows = read_table(spark, config.table("bronze/events")).select("_kafka_offset").collect()
    return sorted(row._kafka_offset for row in rows)


def _gaps(spark, config: Config) -> list[tuple]:
    return [
        (
            g["stream"],
            g["kind"],
            g["topic"],
            g["kafka_partition"],
            g["from_offset"],
            g["until_offset"],
        )
        for g in recorded_gaps(spark, config)
    ]


def _event(n: int) -> str:
    return json.dumps(
        {"event_id": f"g{n}", "event_type": "view", "user_id": "u1", "product_id": "p1",
         "event_timestamp": "2026-11-20T10:00:00Z"}
    )  # fmt: skip


def test_records_deleted_before_they_were_read_stop_bronze_until_the_loss_is_accepted(
    spark, kafka_broker, tmp_path
):
    """Records expire (here: deleteRecords, exactly) between two runs. The default stops the
    stream with the way out and writes nothing; --kafka-accept-data-loss reads what remains and
    records the lost offsets, once, in <lake>/_system/data_gaps."""
    topic = _topic("events")
    kafka_broker.create_topic(topic)
    produce(kafka_broker.bootstrap, topic, [_event(n) for n in range(10)])
    config = _config(tmp_path / "lake", kafka_broker.bootstrap, topic)
    _run_and_check(spark, config)
    assert _offsets(spark, config) == list(range(10))

    produce(kafka_broker.bootstrap, topic, [_event(n) for n in range(10, 20)])
    _delete_records_before(kafka_broker, topic, 15)  # 10..14 were never read

    with pytest.raises(PipelineError, match="bronze_events") as failure:
        _run_and_check(spark, config)
    hint = kafka_data_loss_hint(failure.value.__cause__, config)
    assert hint is not None, failure_text(failure.value.__cause__)[-3000:]
    assert f"{topic}-0 at offsets [10, 20) were gone" in hint
    assert "--kafka-accept-data-loss" in hint and "--layer bronze" in hint
    assert hint in str(failure.value)  # the run's one-line failure carries the way out
    assert _offsets(spark, config) == list(range(10)), "bronze changed"
    assert _gaps(spark, config) == []

    # The next batch starts with records bronze does not keep (an empty value, a tombstone):
    # a hole in bronze, but Kafka still has them, so nothing was lost there.
    produce(kafka_broker.bootstrap, topic, ["", None, _event(22)])
    accepting = _config(tmp_path / "lake", kafka_broker.bootstrap, topic, fail_on_data_loss=False)
    _run_and_check(spark, accepting)  # replays the planned batch [10, 20), then [20, 23)

    assert _offsets(spark, config) == [*range(10), *range(15, 20), 22]
    lost = ("bronze_events", "kafka data loss", topic, 0, 10, 15)
    assert _gaps(spark, config) == [lost]
    detail = recorded_gaps(spark, config)[0]["detail"]
    assert "records 10 to 14 expired (retention) or were deleted" in detail, detail

    # A crash between recording and moving the watermark: the next check records it once.
    checkpoint = config.checkpoint("bronze_events")
    mark_checked(checkpoint, KAFKA_GAPS_CHECK, checked_through(checkpoint, KAFKA_GAPS_CHECK) - 2)
    assert record_kafka_gaps(spark, accepting, "bronze_events") == []
    # A later run, back to the default, records nothing new.
    produce(kafka_broker.bootstrap, topic, [_event(23)])
    _run_and_check(spark, config)
    assert _offsets(spark, config)[-2:] == [22, 23]
    assert _gaps(spark, config) == [lost]


def test_a_recreated_topic_stops_bronze_and_accepting_records_what_spark_skipped(
    spark, kafka_broker, tmp_path
):
    """A topic deleted and recreated with fewer records than bronze had read: its offsets go
    back. The default stops; accepting, Spark skips the new topic's records below the new end
    offset and reads on from there; both losses are recorded."""
    topic = _topic("events")
    kafka_broker.create_topic(topic)
    produce(kafka_broker.bootstrap, topic, [_event(n) for n in range(5)])
    config = _config(tmp_path / "lake", kafka_broker.bootstrap, topic)
    _run_and_check(spark, config)
    _recreate_topic(kafka_broker, topic)
    produce(kafka_broker.bootstrap, topic, [_event(n) for n in range(100, 102)])

    with pytest.raises(PipelineError) as failure:
        _run_and_check(spark, config)
    hint = kafka_data_loss_hint(failure.value.__cause__, config)
    assert hint is not None and f"{topic}-0 went back from 5 to 2" in hint, hint
    assert hint in str(failure.value)

    produce(kafka_broker.bootstrap, topic, [_event(n) for n in range(102, 105)])
    accepting = _config(tmp_path / "lake", kafka_broker.bootstrap, topic, fail_on_data_loss=False)
    _run_and_check(spark, accepting)  # replays the planned batch (5 -> 2), then [2, 5)

    # Spark skipped the new topic's g100 and g101 (offsets 0, 1) and read on from offset 2;
    # bronze holds offsets 2 to 4 twice now, of the old topic and of the new one.
    rows = rows_of(config, "bronze/events")
    assert sorted(int(r.event_id[1:]) for r in rows) == [0, 1, 2, 3, 4, 102, 103, 104]
    assert sorted(_gaps(spark, config), key=repr) == [
        ("bronze_events", "kafka data loss", topic, 0, 0, 2),  # the new topic's g100, g101
        ("bronze_events", "kafka data loss", topic, 0, 5, None),  # the old topic, from 5 on
    ]


def test_a_run_on_a_new_lake_reads_the_pipelines_whose_topics_hold_records(
    spark, kafka_broker, tmp_path
):
    """Without ``--pipeline``, a Kafka run on a lake without tables runs the pipelines that
    have records in a topic, and never subscribes to a topic that does not exist."""
    from medallion.streams.run_choice import with_input

    def retail_topics(events: str, customers: str) -> Config:
        options = KafkaSourceOptions(
            bootstrap_servers=kafka_broker.bootstrap,
            topics={"events": events, "customers": customers},
        )
        lake = str(tmp_path / "lake")
        return Config(landing=lake, lake=lake, source="kafka", kafka=options)

    nowhere = retail_topics(_topic("missing"), _topic("missing"))
    chosen = with_input(spark, nowhere)
    assert chosen is None or "retail" not in chosen.pipelines
    events = _topic("events")
    kafka_broker.create_topic(events, partitions=1)
    produce(kafka_broker.bootstrap, events, _events(3, seed=1))
    fed = with_input(spark, retail_topics(events, _topic("missing")))
    assert fed is not None and "retail" in fed.pipelines


# --- Lag: `medallion status` asks the broker (docs/operations.md) ---


def test_status_counts_the_records_not_read_and_fails_closed_without_the_broker(
    spark, kafka_broker, tmp_path, capsys, monkeypatch
):
    """Records produced after a run are the bronze stream's lag, per topic and in all; a
    stream whose lag cannot be told (no broker given, or none answering) makes ``--max-lag``
    exit 3, naming it, unless a stream is behind (exit 1)."""
    from kafka_broker import free_port

    from medallion.cli import main
    from medallion.streams import kafka_lag

    topic = _topic("events")
    kafka_broker.create_topic(topic, partitions=2)
    produce(kafka_broker.bootstrap, topic, _events(40, seed=91))
    config = _config(tmp_path / "lake", kafka_broker.bootstrap, topic)
    run_available_now(spark, config, flows=BRONZE)
    later = _events(30, seed=92)
    produce(kafka_broker.bootstrap, topic, later)
    lake = ["status", "--lake", config.lake, "--pipeline", "retail", "--events-topic", topic]
    status = [*lake, "--kafka-bootstrap", kafka_broker.bootstrap]

    assert main([*status, "--output", "json", "--max-lag", str(len(later))]) == 0
    out = json.loads(capsys.readouterr().out)
    lags = {s["stream"]: s["lag"] for s in out["streams"]}
    assert lags["bronze_events"] == {
        "kind": "kafka",
        "records_behind": len(later),
        "topics": [{"topic": topic, "partitions": 2, "records_behind": len(later)}],
    }
    # Never started, its topic not created: nothing to read.
    assert lags["bronze_customers"]["records_behind"] == 0
    assert out["lag_unknown"] == []
    assert main([*status, "--max-lag", str(len(later) - 1)]) == 1
    out, err = capsys.readouterr()
    assert f"{len(later)} records of {topic} unread" in out
    assert f"behind: bronze_events: {len(later)} Kafka records of {topic} unread" in err

    # No broker given: the Kafka streams' lag is unknown (their checkpoints say Kafka).
    assert main([*lake, "--max-lag", "1000"]) == 3
    err = capsys.readouterr().err
    assert "unknown: bronze_events: lag unknown: a Kafka stream: give --kafka-bootstrap" in err
    # A broker that does not answer: unknown, asked once for every stream (each request given
    # 2 s here instead of kafka_lag.TIMEOUT_SECONDS, so that the wait is short).
    monkeypatch.setattr(kafka_lag, "TIMEOUT_SECONDS", 2)
    started = time.monotonic()
    nowhere = [*lake, "--kafka-bootstrap", f"127.0.0.1:{free_port()}", "--max-lag", "1000"]
    assert main(nowhere) == 3
    err = capsys.readouterr().err
    assert "unknown: bronze_events: lag unknown: the Kafka broker at 127.0.0.1:" in err
    assert "did not answer: TimeoutException" in err
    assert "unknown: bronze_customers: lag unknown: the Kafka broker" in err
    assert time.monotonic() - started < 60
