"""The way out, in one line, for a stream that stopped because Kafka records it had not read are
gone (Spark's ``failOnDataLoss``; docs/kafka.md)."""

from __future__ import annotations

import re

from medallion.config import Config
from medallion.errors import failure_text, is_failure
from medallion.gaps import gaps_table

_UNREAD_RANGE = re.compile(
    r"Could not read records in offset \[(\d+), (\d+)\) for topic partition (\S+)"
)
_WENT_BACK = re.compile(r"Partition (\S+) offset was changed from (\d+) to (\d+)")
_START_RESET = re.compile(r"Starting offset for (\S+) was (\d+) but consumer reset to (\d+)")
_ADDED = re.compile(r"Added partition (\S+) starts from (\d+) instead of 0")
_DELETED = re.compile(r"Partitions (.+?) have been deleted")


def kafka_data_loss_hint(error_text: str | BaseException, config: Config) -> str | None:
    """One line for a stream that stopped because Kafka records it had not read are gone:
    what happened and the ways out. None when the failure is something else.

    Pass the failure itself (or :func:`failure_text` of it): the message alone of a failed
    micro-batch names only the Delta write that failed, not the Kafka read under it.
    """
    if config.source != "kafka":
        return None
    text = failure_text(error_text)
    if not is_failure(text, "kafka data loss"):
        return None
    if match := _UNREAD_RANGE.search(text):
        start, end, partition = match.groups()
        what = (
            f"Kafka records of {partition} at offsets [{start}, {end}) were gone before they "
            "were read (expired by retention, or deleted)"
        )
    elif match := _WENT_BACK.search(text):
        partition, before, after = match.groups()
        what = (
            f"the offsets of Kafka partition {partition} went back from {before} to {after}: the "
            "topic was deleted and recreated (or the partition truncated) before the stream read "
            "the old records"
        )
    elif match := _START_RESET.search(text):
        partition, start, _ = match.groups()
        what = (
            f"Kafka records of {partition} from offset {start} on were gone before they were "
            "read (expired by retention, or deleted)"
        )
    elif match := _ADDED.search(text):
        what = (
            f"the first records of the new Kafka partition {match.group(1)} (below offset "
            f"{match.group(2)}) were gone before they were read"
        )
    elif match := _DELETED.search(text):
        what = f"Kafka partitions {match.group(1)} were deleted before the stream read them"
    else:
        what = (
            "Kafka records the stream had not read yet are gone (expired by retention, deleted, "
            "or the topic was recreated)"
        )
    return (
        f"{what}. Nothing brings them back: run `medallion run --source kafka ... "
        "--kafka-accept-data-loss` (job parameter kafka_fail_on_data_loss=false) to read what "
        f"remains and record the lost offsets in {gaps_location(config)}, or rebuild bronze and what "
        f"is downstream from what the topic still holds with `medallion reset --lake "
        f"{config.lake} --layer bronze` (docs/kafka.md, Records lost before they were read)"
    )


def gaps_location(config: Config) -> str:
    """Where the lost offsets are recorded: the data gaps table's path, or its name."""
    table = gaps_table(config)
    return table.path if table.path is not None else table.qualified_name
