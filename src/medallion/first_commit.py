"""A new path table's first commit, written as Delta writes it, without a Spark command.

``CREATE TABLE`` runs a Spark job and a transaction per table: about 0.1 s each in a warm
session and seconds in a new process, paid again for every table of a fresh lake. Its result
is small and fixed by the Delta protocol: version 0 of the log (``commitInfo``, ``metaData``
and ``protocol`` actions) and that version's checksum file (``.crc``), which spares readers
the job that would rebuild the table's protocol and metadata from the log. This module writes
both for tables whose protocol it can tell exactly (:func:`first_protocol`), and declines the
rest (``None``), which Delta then creates as before. tests/integration/test_first_commit.py
holds every declared table to what Delta's own ``CREATE TABLE`` writes.

The commit file is published only if no commit 0 exists (a hard link, which fails rather
than replace one), and the checksum after it, so a crash leaves no table, or a whole version 0
with or without its checksum (which Delta does not need).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import SparkSession

from medallion import __version__
from medallion.sql_names import TableRef
from medallion.storage import local_path

# Table properties whose protocol needs are known: none beyond Delta's default (1, 2) but
# the Change Data Feed's writer feature.
_PROPERTIES_OF_THE_DEFAULT_PROTOCOL = frozenset(
    {
        "delta.appendOnly",
        "delta.autoOptimize.autoCompact",
        "delta.autoOptimize.optimizeWrite",
        "delta.checkpointInterval",
        "delta.deletedFileRetentionDuration",
        "delta.enableChangeDataFeed",
        "delta.logRetentionDuration",
    }
)
# Column types that need no table feature (timestamp_ntz, variant and the others do).
_PLAIN_TYPES = frozenset(
    {"string", "long", "integer", "short", "byte", "double", "float", "boolean", "binary"}
    | {"date", "timestamp"}
)
# Session settings that Delta adds to a new table's properties (``...defaults.enableChangeDataFeed``
# becomes ``delta.enableChangeDataFeed``), unless the table sets them itself.
_DEFAULTS_PREFIX = "spark.databricks.delta.properties.defaults."

# Delta's file size histogram bins (FileSizeHistogramUtils.DEFAULT_BINS): an empty table's
# checksum holds them with zero counts.
_KB, _MB, _GB = 1024, 1024**2, 1024**3
_HISTOGRAM_BINS = (
    [0]
    + [2**n * _KB for n in range(3, 10)]
    + [2**n * _MB for n in range(0, 3)]
    + [n * 4 * _MB for n in range(2, 11)]
    + [n * 8 * _MB for n in range(6, 16)]
    + [n * 4 * _MB for n in range(31, 37)]
    + [n * 16 * _MB for n in range(10, 37)]
    + [n * 64 * _MB for n in range(10, 23)]
    + [n * 128 * _MB for n in range(12, 17)]
    + [n * 256 * _MB for n in range(9, 17)]
    + [2**n * _GB for n in range(3, 9)]
)


def plain_schema(schema: Mapping[str, Any]) -> bool:
    """True when every column of the schema (as Delta stores it) has a type that needs no
    table feature, and no metadata but a comment (no default, generation or identity)."""

    def plain(data_type: Any) -> bool:
        if isinstance(data_type, str):
            return data_type in _PLAIN_TYPES or data_type.startswith("decimal(")
        kind = data_type.get("type")
        if kind == "struct":
            return plain_schema(data_type)
        if kind == "array":
            return plain(data_type["elementType"])
        if kind == "map":
            return plain(data_type["keyType"]) and plain(data_type["valueType"])
        return False

    return all(
        set(field.get("metadata", {})) <= {"comment"} and plain(field["type"])
        for field in schema.get("fields", [])
    )


def first_protocol(configuration: Mapping[str, str]) -> dict[str, Any] | None:
    """The protocol Delta gives a new table with these properties, or None when it is not one
    this module can tell.

    >>> first_protocol({"delta.appendOnly": "true"})
    {'minReaderVersion': 1, 'minWriterVersion': 2}
    >>> first_protocol({"delta.enableChangeDataFeed": "true"})["writerFeatures"]
    ['appendOnly', 'changeDataFeed', 'invariants']
    >>> first_protocol({"delta.enableDeletionVectors": "true"}) is None
    True
    """
    if not set(configuration) <= _PROPERTIES_OF_THE_DEFAULT_PROTOCOL:
        return None
    if configuration.get("delta.enableChangeDataFeed", "false").lower() != "true":
        return {"minReaderVersion": 1, "minWriterVersion": 2}
    # A writer feature takes the table to writer version 7, listing the features of version 2.
    features = ["appendOnly", "changeDataFeed", "invariants"]
    return {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": features}


def first_commit(
    schema: Mapping[str, Any],
    configuration: Mapping[str, str],
    partition_columns: Sequence[str] = (),
    engine: str = "",
    now_ms: int | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
    """Version 0 of a new table (its actions) and its checksum, or None when this module
    cannot write it as Delta would (Delta then creates the table)."""
    protocol = first_protocol(configuration)
    if protocol is None or not plain_schema(schema):
        return None
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    txn_id = str(uuid.uuid4())
    metadata = {
        "id": str(uuid.uuid4()),
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(schema, separators=(",", ":")),
        "partitionColumns": list(partition_columns),
        "configuration": dict(configuration),
        "createdTime": now_ms,
    }
    commit_info = {
        "timestamp": now_ms,
        "operation": "CREATE TABLE",
        "operationParameters": {
            "partitionBy": json.dumps(list(partition_columns), separators=(",", ":")),
            "clusterBy": "[]",
            "description": None,
            "isManaged": "false",
            "properties": json.dumps(dict(configuration), separators=(",", ":")),
        },
        "isolationLevel": "Serializable",
        "isBlindAppend": True,
        "operationMetrics": {},
        "engineInfo": f"medallion/{__version__} {engine}".strip(),
        "txnId": txn_id,
    }
    actions = [{"commitInfo": commit_info}, {"metaData": metadata}, {"protocol": protocol}]
    empty = [0] * len(_HISTOGRAM_BINS)
    checksum = {
        "txnId": txn_id,
        "tableSizeBytes": 0,
        "numFiles": 0,
        "numMetadata": 1,
        "numProtocol": 1,
        "setTransactions": [],
        "domainMetadata": [],
        "metadata": metadata,
        "protocol": protocol,
        "fileSizeHistogram": {
            "sortedBinBoundaries": _HISTOGRAM_BINS,
            "fileCounts": empty,
            "totalBytes": empty,
        },
        "allFiles": [],
    }
    return actions, checksum


def with_session_defaults(properties: Mapping[str, str], settings: Mapping[str, str]) -> dict:
    """The properties Delta gives a new table: ``properties`` over the session's defaults.

    >>> defaults = {"spark.databricks.delta.properties.defaults.appendOnly": "true", "x": "1"}
    >>> with_session_defaults({"delta.checkpointInterval": "5"}, defaults)
    {'delta.appendOnly': 'true', 'delta.checkpointInterval': '5'}
    """
    defaults = {
        f"delta.{key.removeprefix(_DEFAULTS_PREFIX)}": value
        for key, value in settings.items()
        if key.startswith(_DEFAULTS_PREFIX)
    }
    return {**defaults, **properties}


def publish_first_commit(
    table_path: str, actions: Sequence[dict[str, Any]], checksum: Mapping[str, Any]
) -> bool:
    """Write version 0 and its checksum into a local table folder; False, with nothing written,
    when the table already has a version 0 or the file system has no hard links."""
    log_dir = os.path.join(table_path, "_delta_log")
    made_log_dir = not os.path.isdir(log_dir)
    os.makedirs(log_dir, exist_ok=True)
    commit = os.path.join(log_dir, f"{0:020d}.json")
    staged = os.path.join(log_dir, f".{0:020d}.json.{uuid.uuid4().hex}.tmp")
    with open(staged, "w", encoding="utf-8") as handle:
        handle.write("\n".join(json.dumps(a, separators=(",", ":")) for a in actions) + "\n")
    try:
        os.link(staged, commit)  # fails, replacing nothing, when commit 0 exists
    except FileExistsError:
        return False
    except OSError:  # a file system without hard links (a FUSE mount): Delta creates it
        os.remove(staged)
        if made_log_dir:
            os.rmdir(log_dir)
        return False
    finally:
        if os.path.exists(staged):
            os.remove(staged)
    crc = os.path.join(log_dir, f"{0:020d}.crc")
    staged_crc = f"{crc}.{uuid.uuid4().hex}.tmp"
    with open(staged_crc, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(checksum, separators=(",", ":")))
    os.replace(staged_crc, crc)
    return True


def write_first_commit(
    spark: SparkSession,
    table: TableRef,
    columns: str,
    properties: Mapping[str, str],
    partitioned_by: Sequence[str] = (),
) -> bool:
    """Create a local path table (DDL ``columns``) by writing its first commit; False, with
    nothing written, when that does not apply: a catalog or remote table, Spark Connect, a
    table whose protocol Delta must choose."""
    local = local_path(table.path) if table.path is not None else None
    if local is None:
        return False
    try:
        jvm = spark.sparkContext._jvm  # type: ignore[union-attr]
        schema = json.loads(jvm.org.apache.spark.sql.types.StructType.fromDDL(columns).json())
        settings = spark.conf.getAll
    except Exception:  # noqa: BLE001 - Spark Connect: no JVM here; Delta creates the table
        return False
    configuration = with_session_defaults(properties, settings)
    engine = f"Apache-Spark/{spark.version}"
    commit = first_commit(schema, configuration, partitioned_by, engine)
    return commit is not None and publish_first_commit(local, *commit)
