"""How many Kafka records a stream has not read yet, for ``medallion status``: the latest offset
of each partition of its topics, asked of the broker, against where its checkpoint says it
resumes (:func:`~medallion.streams.checkpoint_files.kafka_offsets`).

The broker is asked by a Kafka consumer in the driver's JVM (the client Spark's Kafka connector
brings), with the servers and security options a run uses
(:func:`~medallion.streams.kafka.connection_options`). It only asks for metadata and reads no
record, so a backlog of ten million records costs as little to count as one of ten. A
partition's lag is its latest offset less the stream's position in it, or less its earliest
offset when that is higher (records that expired before they were read, a partition new since
the last batch): what is left to read. As with Kafka's own consumer lag, offsets without a
readable record (transaction markers, records removed by compaction) count as records.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from pyspark.sql import SparkSession

from medallion.config import Config
from medallion.session import session_kind
from medallion.streams.checkpoint_files import kafka_offsets
from medallion.streams.kafka import DATABRICKS_SHADED_PREFIX, connection_options

# How long the broker has to answer each request; one that does not makes the lag unknown.
TIMEOUT_SECONDS = 10


class LagUnknown(Exception):
    """The lag cannot be told; the message says why (never a credential)."""


class BrokerNotAsked(LagUnknown):
    """The broker could not be asked (no client here, or no answer): no other stream's lag can
    be told through it either."""


@dataclass(frozen=True)
class TopicLag:
    """What a stream has not read of one topic: ``records_behind``, over its ``partitions``."""

    topic: str
    partitions: int
    records_behind: int


def kafka_lag(spark: SparkSession, config: Config, checkpoint: str, topic: str) -> list[TopicLag]:
    """The records a Kafka-source stream has not read, per topic: those of the topics its
    checkpoint has positions in, or, for a stream that has none yet, every record ``topic``
    holds (a topic not created yet holds none). Raises :class:`LagUnknown`."""
    try:
        position = kafka_offsets(checkpoint)
    except (OSError, ValueError, IndexError, AttributeError) as error:
        raise LagUnknown(
            f"its checkpoint's offsets cannot be read ({type(error).__name__})"
        ) from None
    topics = sorted(position) if position else [topic]
    offsets = partition_offsets(spark, config, topics)
    lags = []
    for name in topics:
        if name not in offsets:
            if position:
                raise LagUnknown(f"its topic {name} is not on the broker (deleted?)")
            lags.append(TopicLag(name, 0, 0))
            continue
        read = (position or {}).get(name, {})
        behind = sum(
            max(0, latest - max(read.get(partition, earliest), earliest))
            for partition, (earliest, latest) in offsets[name].items()
        )
        lags.append(TopicLag(name, len(offsets[name]), behind))
    return lags


def partition_offsets(
    spark: SparkSession, config: Config, topics: list[str]
) -> dict[str, dict[int, tuple[int, int]]]:
    """The (earliest, latest) offset of every partition of each of ``topics`` the broker has.
    Raises :class:`BrokerNotAsked` when the broker cannot be asked."""
    jvm, kafka, prefix = _client(spark)
    properties = _properties(spark, config, jvm, prefix)
    timeout = jvm.java.time.Duration.ofSeconds(TIMEOUT_SECONDS)
    found: dict[str, dict[int, tuple[int, int]]] = {}
    consumer = None
    try:
        consumer = kafka.clients.consumer.KafkaConsumer(properties)
        for topic in topics:
            partitions = jvm.java.util.ArrayList()
            for info in consumer.partitionsFor(topic, timeout) or []:
                partitions.add(kafka.common.TopicPartition(topic, info.partition()))
            if partitions.isEmpty():
                continue  # no such topic
            earliest = consumer.beginningOffsets(partitions, timeout)
            latest = consumer.endOffsets(partitions, timeout)
            found[topic] = {
                p.partition(): (int(earliest.get(p)), int(latest.get(p))) for p in partitions
            }
    except Exception as error:  # noqa: BLE001 - Py4J carries the client's exception
        raise BrokerNotAsked(
            f"the Kafka broker at {config.kafka.bootstrap_servers} did not answer: {_why(error)}"
        ) from None
    finally:
        if consumer is not None:
            with contextlib.suppress(Exception):
                consumer.close(jvm.java.time.Duration.ofSeconds(1))
    return found


def _client(spark: SparkSession) -> tuple[object, object, str]:
    """The driver's JVM, its Kafka client package and the prefix of the client's class names
    (``kafkashaded.`` on Databricks Runtime)."""
    # deferred: py4j comes with classic pyspark, not with a Spark Connect client
    from py4j.java_gateway import JavaClass

    try:
        jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - Spark Connect sessions have no sparkContext
        jvm = None
    if jvm is None:
        raise BrokerNotAsked("this Spark session has no JVM here to ask the Kafka broker from")
    shaded = session_kind() in ("databricks", "databricks-connect")
    prefix = DATABRICKS_SHADED_PREFIX if shaded else ""
    kafka = jvm
    for name in f"{prefix}org.apache.kafka".split("."):
        kafka = getattr(kafka, name)
    if not isinstance(kafka.clients.consumer.KafkaConsumer, JavaClass):
        raise BrokerNotAsked("Spark's Kafka connector is not loaded in this Spark session")
    return jvm, kafka, prefix


def _properties(spark: SparkSession, config: Config, jvm: object, prefix: str) -> object:
    """The consumer's settings: the run's ``kafka.*`` options without their prefix, and a
    consumer that only asks (no group, no commits, no topic created by asking)."""
    deserializer = f"{prefix}org.apache.kafka.common.serialization.ByteArrayDeserializer"
    settings = {
        key.removeprefix("kafka."): value
        for key, value in connection_options(spark, config).items()
    }
    settings.update(
        {
            "key.deserializer": deserializer,
            "value.deserializer": deserializer,
            "client.id": "medallion-status",
            "enable.auto.commit": "false",
            "allow.auto.create.topics": "false",
            "request.timeout.ms": str(TIMEOUT_SECONDS * 1000),
            "default.api.timeout.ms": str(TIMEOUT_SECONDS * 1000),
        }
    )
    properties = jvm.java.util.Properties()  # type: ignore[attr-defined]
    for key, value in settings.items():
        properties.setProperty(key, value)
    return properties


def _why(error: Exception) -> str:
    """The client's exception as ``Class: first line`` (Kafka hides password values)."""
    java = getattr(error, "java_exception", None)
    if java is not None:
        message = java.getMessage() or ""
        name = java.getClass().getSimpleName()
    else:
        message, name = str(error), type(error).__name__
    first = next((line.strip() for line in message.splitlines() if line.strip()), "")
    return f"{name}: {first[:200]}" if first else name
