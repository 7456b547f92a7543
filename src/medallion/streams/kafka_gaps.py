"""Kafka records lost before bronze read them: the way out when a stream stops, and the record.

A Kafka partition keeps its records for a while (retention), and an operator may delete
records or delete and recreate a topic. When records a bronze stream has not read yet are gone,
Spark's ``failOnDataLoss`` decides: by default (``KafkaSourceOptions.fail_on_data_loss``) the
stream stops, and :func:`~medallion.streams.kafka_loss_hint.kafka_data_loss_hint` turns Spark's
error into one line with the way out. ``--kafka-accept-data-loss`` reads what remains instead; :func:`record_kafka_gaps` then
writes each lost range, per topic partition, to ``<lake>/_system/data_gaps`` (medallion/gaps.py).

How a loss is found, cheaply and after the fact, for the batches committed since the last check
(a watermark in the checkpoint): each batch's range of one partition is ``[start, end)``, from
the end offsets of the batch before it and of the batch itself (``offsets/<batch>``). One query
over bronze finds the smallest offset each batch wrote in each range (bronze rows of a batch
carry its timestamp in ``_ingested_at``). Retention removes a prefix of a partition, so only a
hole at the *start* of a range can be a loss; such a hole is then confirmed with the broker: it
is a loss only when ``start`` is below the partition's first offset now, so records Kafka still
has (blank values and tombstones, which bronze does not keep), transaction markers and
compacted records are never recorded. Offsets that went back (``end < start``) mean the topic
was recreated (or the partition truncated): Spark then skips the new topic's records below
``end``, and the old topic's records from ``start`` on were never read; both are recorded.

Only local (or FUSE-mounted) checkpoints are read. A recreated topic that already holds more
records than the stream had read is read from the old position on without any sign of it: the
new topic's first records are skipped and neither Spark nor this check can tell (docs/kafka.md).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from medallion.config import Config
from medallion.declarations import Landing
from medallion.errors import is_failure
from medallion.gaps import Gap, checked_through, mark_checked, recorded_gaps
from medallion.gaps import record_gaps as append_gaps
from medallion.pipelines import all_flows
from medallion.source_options import KafkaSourceOptions
from medallion.sql_names import TableRef
from medallion.storage import local_path
from medallion.streams.checkpoint_files import committed_batch
from medallion.streams.kafka import batch_read
from medallion.streams.kafka_loss_hint import gaps_location
from medallion.tables import read_table, rows_frame, table_exists

log = logging.getLogger(__name__)

CHECK = "kafka_gaps"
KIND = "kafka data loss"


def _bronze_of(stream: str) -> tuple[str, str] | None:
    """The dataset a stream reads as input records (from Kafka, with the Kafka source) and the
    table it appends them to; None for a stream that reads a table."""
    for flow in all_flows():
        if flow.name == stream and isinstance(flow.source, Landing):
            return flow.source.dataset, flow.writes[0]
    return None


# Present in a checkpoint while batches may have been read with failOnDataLoss=false and not
# checked yet: a later run with the default still checks them.
ACCEPTING_MARKER = "_medallion_kafka_accepting_data_loss"


@dataclass(frozen=True)
class _Range:
    """What one batch read of one partition: offsets ``[start, end)``."""

    batch: int
    timestamp_ms: int  # the batch's timestamp: bronze's ``_ingested_at`` of its rows
    topic: str
    partition: int
    start: int
    end: int


@dataclass(frozen=True)
class _Batch:
    timestamp_ms: int
    offsets: dict[str, dict[int, int]]  # topic -> partition -> end offset


def _read_batch(checkpoint: str, batch_id: int) -> _Batch | None:
    """A batch's timestamp and the end offsets of its Kafka source (None: not readable)."""
    try:
        with open(os.path.join(checkpoint, "offsets", str(batch_id)), encoding="utf-8") as f:
            lines = [line.strip() for line in f if line.strip()]
        metadata, source = json.loads(lines[1]), json.loads(lines[2])
        offsets = {
            str(topic): {int(p): int(o) for p, o in partitions.items()}
            for topic, partitions in source.items()
        }
        return _Batch(int(metadata["batchTimestampMs"]), offsets)
    except (OSError, IndexError, ValueError, KeyError, TypeError, AttributeError):
        return None  # purged by Spark, or not a Kafka source's offsets


def _starting_offsets(kafka: KafkaSourceOptions) -> dict[str, dict[int, int]]:
    """The explicit offsets of a JSON ``starting_offsets`` (-1/-2, latest/earliest, left out)."""
    try:
        parsed = json.loads(kafka.starting_offsets)
        return {
            str(topic): {int(p): int(o) for p, o in partitions.items() if int(o) >= 0}
            for topic, partitions in parsed.items()
        }
    except (ValueError, TypeError, AttributeError):
        return {}


def _lost(
    stream: str, topic: str, partition: int, start: int, until: int | None, detail: str
) -> Gap:
    """A gap of Kafka records: offsets [``start``, ``until``) of one partition."""
    return Gap(
        stream=stream,
        kind=KIND,
        topic=topic,
        kafka_partition=partition,
        from_offset=start,
        until_offset=until,
        detail=detail,
    )


def _went_back(stream: str, batch: int, topic: str, partition: int, start: int, end: int):
    """The two gaps of a partition whose offsets went back from ``start`` to ``end``."""
    change = (
        f"batch {batch}: the offsets of {topic}-{partition} went back from {start} to {end} "
        "(the topic was deleted and recreated, or the partition truncated)"
    )
    gaps = [
        _lost(
            stream,
            topic,
            partition,
            start,
            None,
            f"{change}: records of the old topic from offset {start} on, if any, were never read",
        )
    ]
    if end > 0:
        gaps.append(
            _lost(
                stream,
                topic,
                partition,
                0,
                end,
                f"{change}: Spark skipped the records below offset {end} written after the change",
            )
        )
    return gaps


def _ranges(
    config: Config, stream: str, checkpoint: str, first: int, last: int
) -> tuple[list[_Range], list[Gap]]:
    """The ranges batches ``first``..``last`` read, and the gaps of offsets that went back."""
    ranges: list[_Range] = []
    gaps: list[Gap] = []
    bronze = _bronze_of(stream)
    assert bronze is not None
    subscribed = config.kafka.topic(bronze[0])
    previous = _read_batch(checkpoint, first - 1) if first > 0 else None
    before = (
        previous.offsets if previous else (_starting_offsets(config.kafka) if first == 0 else None)
    )
    for batch_id in range(first, last + 1):
        batch = _read_batch(checkpoint, batch_id)
        if batch is None:
            before = None
            continue
        if before is None:  # the batch before is unknown: so is where this one started
            log.debug("%s: batch %d has no readable batch before it; not checked", stream, batch_id)
            before = batch.offsets
            continue
        for topic, partitions in batch.offsets.items():
            known = before.get(topic)
            for partition, end in partitions.items():
                if known is None:
                    continue  # a topic new to this batch: where it started is unknown
                start = known.get(partition, 0)  # a new partition is read from its start
                if end < start:
                    gaps.extend(_went_back(stream, batch_id, topic, partition, start, end))
                elif end > start:
                    ranges.append(
                        _Range(batch_id, batch.timestamp_ms, topic, partition, start, end)
                    )
        for topic, partitions in before.items():
            for partition, start in partitions.items():
                if topic == subscribed and partition not in batch.offsets.get(topic, {}):
                    gaps.append(
                        _lost(
                            stream,
                            topic,
                            partition,
                            start,
                            None,
                            f"batch {batch_id}: partition {topic}-{partition} is gone; "
                            f"its records from offset {start} on, if any, were never read",
                        )
                    )
        before = batch.offsets
    return ranges, gaps


def _first_written(spark: SparkSession, bronze_table: TableRef, ranges: list[_Range]):
    """The smallest offset bronze holds of each range, from that range's batch (one query)."""
    schema = "rid INT, ts BIGINT, topic STRING, kafka_partition INT, start BIGINT, until BIGINT"
    rows = [
        {
            "rid": i,
            "ts": r.timestamp_ms,
            "topic": r.topic,
            "kafka_partition": r.partition,
            "start": r.start,
            "until": r.end,
        }
        for i, r in enumerate(ranges)
    ]
    wanted = rows_frame(spark, rows, schema).withColumn("ingested", F.timestamp_millis("ts"))
    stamps = sorted({r.timestamp_ms for r in ranges})
    bronze = read_table(spark, bronze_table).where(
        F.col("_ingested_at").isin(*[F.timestamp_millis(F.lit(ms)) for ms in stamps])
    )  # only the files of these batches (Delta's data skipping on _ingested_at)
    joined = bronze.join(
        F.broadcast(wanted),
        (F.col("_kafka_topic") == F.col("topic"))
        & (F.col("_kafka_partition") == F.col("kafka_partition"))
        & (F.col("_ingested_at") == F.col("ingested"))
        & (F.col("_kafka_offset") >= F.col("start"))
        & (F.col("_kafka_offset") < F.col("until")),
    )
    result = joined.groupBy("rid").agg(F.min("_kafka_offset").alias("min_offset")).collect()
    return {row.rid: row.min_offset for row in result}


def _gone_from_broker(
    spark: SparkSession, config: Config, topic: str, partition: int, start: int
) -> tuple[bool, str | None]:
    """Whether offset ``start`` of a partition is below the partition's first offset now
    (expired or deleted), asking the broker through Spark's Kafka source with
    failOnDataLoss=true, which fails exactly then. (gone, why it could not be asked)."""
    try:
        batch_read(
            spark,
            config,
            assign=json.dumps({topic: [partition]}),
            startingOffsets=json.dumps({topic: {str(partition): start}}),
            endingOffsets=json.dumps({topic: {str(partition): start + 1}}),
            failOnDataLoss="true",
        ).select("offset").collect()
        return False, None
    except Exception as error:  # noqa: BLE001 - Py4J, Spark and Connect errors alike
        if is_failure(error, "kafka data loss"):
            return True, None
        first = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
        return True, f"{type(error).__name__}: {first[:200]}"


def _confirmed(
    spark: SparkSession, config: Config, stream: str, suspects: list[tuple[_Range, int]]
) -> list[Gap]:
    """The suspected holes ``[start, until)`` that are losses, as gaps."""
    gaps = []
    for found, until in suspects:
        gone, unasked = _gone_from_broker(spark, config, found.topic, found.partition, found.start)
        if not gone:
            continue  # Kafka still has offset `start`: blank values, markers, compaction
        detail = (
            f"batch {found.batch}: records {found.start} to {until - 1} expired (retention) or "
            "were deleted before they were read"
        )
        if unasked:
            detail += f" (not confirmed with the broker: {unasked})"
        gaps.append(_lost(stream, found.topic, found.partition, found.start, until, detail))
    return gaps


def _key(gap: Gap | dict) -> tuple:
    get = gap.get if isinstance(gap, dict) else lambda name: getattr(gap, name)
    return tuple(
        get(n)
        for n in ("stream", "kind", "topic", "kafka_partition", "from_offset", "until_offset")
    )


def record_kafka_gaps(spark: SparkSession, config: Config, stream: str) -> list[Gap]:
    """Record in ``<lake>/_system/data_gaps`` the Kafka records a bronze stream skipped because
    they were gone, for the batches it committed since the last call; return the new gaps.

    Call it before the stream starts (a new checkpoint gets its first watermark, a crash's
    unchecked batches are caught up) and after it ran. Batches are only examined when they may
    have been read with ``fail_on_data_loss=False`` (with True, Spark stops rather than skip);
    otherwise only the watermark moves. A checkpoint made before this check is not scanned: it
    is checked from where it stands. Gaps already recorded for the stream are not recorded
    again (a crash between recording and moving the watermark). Raises on a failed query over
    bronze; the watermark stays, so the next call tries again.
    """
    if config.source != "kafka" or _bronze_of(stream) is None:
        return []
    checkpoint = local_path(config.checkpoint(stream))
    if checkpoint is None:
        return []
    accepting = os.path.join(checkpoint, ACCEPTING_MARKER)
    if not config.kafka.fail_on_data_loss and not os.path.exists(accepting):
        os.makedirs(checkpoint, exist_ok=True)
        with open(accepting, "w", encoding="utf-8") as handle:
            handle.write("batches may be read with failOnDataLoss=false\n")
    since, committed = checked_through(checkpoint, CHECK), committed_batch(checkpoint)
    if since is None:  # first call: a new checkpoint from its first batch, an old one from now
        os.makedirs(checkpoint, exist_ok=True)
        mark_checked(checkpoint, CHECK, -1 if committed is None else committed)
        return []
    gaps: list[Gap] = []
    if committed is not None and committed > since:
        if os.path.exists(accepting):
            gaps = _find_gaps(spark, config, stream, checkpoint, since + 1, committed)
            if gaps:
                already = {_key(row) for row in recorded_gaps(spark, config)}
                gaps = [gap for gap in gaps if _key(gap) not in already]
                append_gaps(spark, config, gaps)
                _warn(config, stream, gaps)
        mark_checked(checkpoint, CHECK, committed)
    if config.kafka.fail_on_data_loss and os.path.exists(accepting):
        os.remove(accepting)  # every batch read accepting data loss has been checked
    return gaps


def _find_gaps(
    spark: SparkSession, config: Config, stream: str, checkpoint: str, first: int, last: int
) -> list[Gap]:
    ranges, gaps = _ranges(config, stream, checkpoint, first, last)
    bronze = _bronze_of(stream)
    assert bronze is not None
    table = config.table(bronze[1])
    if ranges and table_exists(spark, table):
        written = _first_written(spark, table, ranges)
        suspects = []
        for i, found in enumerate(ranges):
            first_offset = written.get(i)
            until = found.end if first_offset is None else int(first_offset)
            if until > found.start:  # a hole at the start of the range: what retention leaves
                suspects.append((found, until))
        gaps.extend(_confirmed(spark, config, stream, suspects))
    return gaps


def _warn(config: Config, stream: str, gaps: list[Gap]) -> None:
    if not gaps:
        return
    known = [g for g in gaps if g.until_offset is not None]
    lost = sum(g.until_offset - g.from_offset for g in known)  # type: ignore[operator]
    unknown = len(gaps) - len(known)
    count = f"{lost} Kafka records" + (
        f" and an unknown number more ({unknown} ranges with no known end)" if unknown else ""
    )
    first = gaps[0]
    log.warning(
        "%s: %s were lost before they were read (the first: %s-%s from offset %s); recorded in %s",
        stream,
        count,
        first.topic,
        first.kafka_partition,
        first.from_offset,
        gaps_location(config),
    )
