"""The lag ``medallion status`` shows for each stream: what it has not read yet, read from its
checkpoint (so it is right whether the streams run or not), or why that cannot be told.

- a stream reading landing files: files landed but not taken by a committed batch (the landing
  folder compared with the checkpoint's ``sources/0`` log). The folder is ``<landing>/<dataset>``
  when a landing folder is given (``--landing``, ``$MEDALLION_LANDING``), else the folder of
  the files the checkpoint records it read;
- a stream reading Kafka: records of its topics not read yet, the broker's latest offsets
  against the checkpoint's (medallion/streams/kafka_lag.py);
- a stream reading a Delta table: versions of the table committed after the position in the
  checkpoint's last committed offsets (``reservoirVersion``; ops/stream_lag.py);
- a stream fused into another, without a checkpoint of its own: none (its carrier's lag).

A stream never started is behind by everything its source holds: every landed file, every
record of its topic, every version of its Delta source (none while that holds no data).

When the lag cannot be told, the lag is ``{"kind": ..., "unknown": why}``: a checkpoint not
readable from here, no landing folder known, a broker that does not answer.
``status --max-lag`` then exits 3 rather than 0 (docs/operations.md).
"""

from __future__ import annotations

import os
from typing import Any

from pyspark.sql import SparkSession

from medallion.config import Config
from medallion.declarations import Flow, Landing
from medallion.ops.stream_lag import stream_lags
from medallion.storage import local_path
from medallion.streams import checkpoint_files as checkpoints
from medallion.streams.flows import fusion_head
from medallion.streams.kafka_lag import BrokerNotAsked, LagUnknown, kafka_lag
from medallion.tables import holds_data, table_version

# What an unreadable checkpoint or landing folder raises as it is read.
_UNREADABLE = (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError)


def unknown(kind: str, why: str) -> dict[str, Any]:
    """The lag of a stream whose lag cannot be told, and why."""
    return {"kind": kind, "unknown": why}


def landing_files(config: Config, flow: Flow, landing: str) -> tuple[int, int]:
    """How many files landed for a flow that reads the landing folder ``landing``, and how
    many of them its committed batches have not taken yet."""
    checkpoint = config.checkpoint(flow.name)
    folder = os.path.join(os.path.abspath(landing), flow.source.key.split("/", 1)[1])
    landed = checkpoints.landed_files(folder)  # listed once: a landing folder may be large
    return len(landed), len(checkpoints.unread_files(checkpoint, landed))


def stream_lag(
    spark: SparkSession,
    config: Config,
    flow: Flow,
    landing: str | None,
    not_asked: dict[str, str] | None = None,
) -> dict[str, Any]:
    """What one stream has not read yet (see the module's description), as ``status`` shows
    it; ``landing`` is the landing folder given, if any. ``not_asked`` collects the Kafka
    brokers that could not be asked, with why, so that one status asks each only once."""
    checkpoint = config.checkpoint(flow.name)
    head = fusion_head(flow.name)
    if head is not None and not checkpoints.exists(checkpoint):
        return {"kind": "fused", "note": f"carried by {head.name} (no lag of its own)"}
    reads_landing = isinstance(flow.source, Landing)
    kind = ("kafka" if config.source == "kafka" else "files") if reads_landing else "delta"
    if local_path(checkpoint) is None:
        return unknown(kind, f"its checkpoint {checkpoint} cannot be read from here")
    try:
        read = checkpoints.source_kind(checkpoint)
    except _UNREADABLE as error:
        return unknown(kind, f"its checkpoint's offsets cannot be read ({type(error).__name__})")
    if reads_landing and read in ("kafka", "files"):
        kind = read
    if kind == "kafka":
        return _kafka(spark, config, flow, checkpoint, {} if not_asked is None else not_asked)
    if kind == "files":
        return _files(flow, checkpoint, landing)
    return _delta(spark, config, flow, checkpoint)


def _files(flow: Flow, checkpoint: str, landing: str | None) -> dict[str, Any]:
    dataset = flow.source.key.split("/", 1)[1]
    try:
        if landing is not None:
            root = os.path.abspath(landing)
            if not os.path.isdir(root):
                return unknown("files", f"no landing folder at {root}")
            folder = os.path.join(root, dataset)
        else:
            folder = checkpoints.read_folder(checkpoint)
            if folder is None:
                done = (
                    "it has read no file yet" if checkpoints.exists(checkpoint) else "not started"
                )
                return unknown(
                    "files",
                    f"no landing folder known ({done}): give --landing or set MEDALLION_LANDING",
                )
            if not os.path.isdir(folder):
                return unknown(
                    "files", f"{folder}, where its checkpoint says it read, is gone: give --landing"
                )
        landed = checkpoints.landed_files(folder)  # listed once: a landing folder may be large
        pending = checkpoints.unread_files(checkpoint, landed)
        replaced = [r.describe() for r in checkpoints.replaced_files(checkpoint, record=False)]
    except _UNREADABLE as error:
        return unknown(
            "files", f"its checkpoint's file log cannot be read ({type(error).__name__})"
        )
    return {
        "kind": "files",
        "folder": folder,
        "landed": len(landed),
        "pending_files": len(pending),
        "replaced_files": replaced,
    }


def _kafka(
    spark: SparkSession, config: Config, flow: Flow, checkpoint: str, not_asked: dict[str, str]
) -> dict[str, Any]:
    servers = config.kafka.bootstrap_servers
    if config.source != "kafka" or servers is None:
        return unknown("kafka", "a Kafka stream: give --kafka-bootstrap to ask the broker")
    if servers in not_asked:
        return unknown("kafka", not_asked[servers])
    dataset = flow.source.key.split("/", 1)[1]
    try:
        topics = kafka_lag(spark, config, checkpoint, config.kafka.topic(dataset))
    except BrokerNotAsked as why:
        not_asked[servers] = str(why)
        return unknown("kafka", str(why))
    except LagUnknown as why:
        return unknown("kafka", str(why))
    return {
        "kind": "kafka",
        "records_behind": sum(t.records_behind for t in topics),
        "topics": [
            {"topic": t.topic, "partitions": t.partitions, "records_behind": t.records_behind}
            for t in topics
        ],
    }


def _delta(spark: SparkSession, config: Config, flow: Flow, checkpoint: str) -> dict[str, Any]:
    source = flow.source.key
    table = config.table(source)
    try:
        found = [lag for lag in stream_lags(spark, config, table) if lag.stream == flow.name]
    except _UNREADABLE as error:
        return unknown("delta", f"its checkpoint's offsets cannot be read ({type(error).__name__})")
    if found:
        lag = found[0]
        return {
            "kind": "delta",
            "source": source,
            "source_version": lag.latest_version,
            "position": lag.position,
            "index": lag.index,
            "versions_behind": lag.versions_behind,
        }
    latest = table_version(spark, table)
    if checkpoints.planned_batch(checkpoint) is not None:
        missing = "its source does not exist" if latest is None else "it holds no position in it"
        return unknown("delta", f"{source}: {missing}")
    # Never started: behind by every version of its source, once that holds data.
    behind = latest + 1 if latest is not None and holds_data(spark, table) else 0
    return {
        "kind": "delta",
        "source": source,
        "source_version": latest,
        "position": None,
        "index": None,
        "versions_behind": behind,
    }
