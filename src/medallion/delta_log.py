"""What a path table's Delta log tells without a Spark job: its versions, each commit's
actions and ``commitInfo``, the batches that wrote it, and the checksum files (parts of the
Delta protocol), read as JSON."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

from medallion.sql_names import TableRef
from medallion.storage import list_names, read_text

# A commit (``00000000000000000007.json``) or a checkpoint of one: what makes a folder a table.
# Staged commits live in ``_delta_log/_staged_commits/`` and are not commits until published.
COMMIT_FILE = re.compile(r"^(\d{20})\.(json|checkpoint(\..+)?\.(parquet|json))$")


def committed_version(spark: SparkSession, table: TableRef) -> int | None:
    """The table's newest committed version from its ``_delta_log`` listing, without Spark jobs;
    None when it has no commit (never created, or its creation was cut short by a crash).

    Raises :class:`LookupError` when the log cannot be listed from here.
    """
    if table.path is None:
        raise LookupError(f"{table.key} is a catalog table")
    names = list_names(spark, f"{table.path.rstrip('/')}/_delta_log")
    if names is None:
        raise LookupError(f"cannot list the Delta log of {table.path}")
    versions = [int(m.group(1)) for m in map(COMMIT_FILE.match, names) if m]
    return max(versions) if versions else None


def checksum(spark: SparkSession, table: TableRef, version: int) -> dict[str, Any] | None:
    """The checksum file of one version of a path table (``_delta_log/<version>.crc``, part of
    the Delta protocol), parsed: read without a Spark job. None when there is none to read (a
    catalog table, a writer that wrote no checksum)."""
    if table.path is None:
        return None
    try:
        return json.loads(read_text(spark, f"{table.path}/_delta_log/{version:020d}.crc"))
    except Exception:  # noqa: BLE001 - no checksum file to read here
        return None


def commit_actions(spark: SparkSession, table: TableRef, version: int) -> list[dict[str, Any]]:
    """The actions of one commit of a path table (``_delta_log/<version>.json``), parsed.

    Raises :class:`LookupError` when the commit cannot be read (a catalog table, a commit that
    the log's clean-up removed)."""
    if table.path is None:
        raise LookupError(f"{table.key} is a catalog table")
    try:
        text = read_text(spark, f"{table.path}/_delta_log/{version:020d}.json")
    except Exception as error:  # noqa: BLE001 - no such commit to read here
        raise LookupError(f"cannot read version {version} of {table.key}") from error
    return [json.loads(line) for line in text.split("\n") if line.strip()]


# The key of medallion's tag in a commit's ``userMetadata`` (streams/exactly_once.py).
BATCH_TAG_KEY = "medallion_batch"


def commit_tags(actions: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Which stream batches wrote a commit: app id -> batch id, from its ``txn`` actions
    (Delta's idempotent writes and its streaming sink) and from the tag medallion puts in its
    ``commitInfo.userMetadata`` (streams/exactly_once.py)."""
    tags = {a["txn"]["appId"]: int(a["txn"]["version"]) for a in actions if "txn" in a}
    metadata = commit_info(actions).get("userMetadata")
    if metadata and BATCH_TAG_KEY in metadata:
        try:
            tag = json.loads(metadata)[BATCH_TAG_KEY]
            tags[str(tag["app"])] = int(tag["batch"])
        except (ValueError, TypeError, KeyError):
            pass  # someone else's metadata that happens to mention the key
    return tags


def commit_info(actions: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A commit's ``commitInfo`` action ({} when it has none)."""
    return next((a["commitInfo"] for a in actions if "commitInfo" in a), {})


def commit_timestamp(actions: Sequence[dict[str, Any]]) -> int | None:
    """When a commit was made (ms since the epoch): its in-commit timestamp when the table
    keeps them, else the writer's clock in its ``commitInfo``; None when it has neither."""
    info = commit_info(actions)
    value = info.get("inCommitTimestamp", info.get("timestamp"))
    return int(value) if value is not None else None


@dataclass(frozen=True)
class Commit:
    """What a commit did, as far as a reader of the table's rows is concerned."""

    version: int
    changes_data: bool  # added or removed a file with ``dataChange`` (OPTIMIZE does not)
    transactions: dict[str, int]  # the batches that wrote it: app id -> batch (commit_tags)


def commits_after(spark: SparkSession, table: TableRef, version: int) -> list[Commit]:
    """Every commit of the table after ``version``, oldest first, without Spark jobs.

    Raises :class:`LookupError` when the table has no ``version`` (it was replaced), or its
    log cannot be listed or a commit read from here."""
    latest = committed_version(spark, table)
    if latest is None or latest < version:
        raise LookupError(f"{table.key} has no version {version}")
    commits = []
    for number in range(version + 1, latest + 1):
        actions = commit_actions(spark, table, number)
        files = [a.get("add") or a.get("remove") for a in actions if "add" in a or "remove" in a]
        commits.append(
            Commit(
                number,
                any(f.get("dataChange", True) for f in files),
                commit_tags(actions),
            )
        )
    return commits


def commit_infos(spark: SparkSession, table: TableRef, version: int) -> list[dict[str, Any]]:
    """The ``commitInfo`` of every commit of the table after ``version``, oldest first, each
    with its ``version``: the operation and its metrics, as ``DESCRIBE HISTORY`` shows them,
    read without a Spark job.

    Raises :class:`LookupError` when the log cannot be listed or a commit read from here."""
    latest = committed_version(spark, table)
    infos = []
    for number in range(version + 1, (latest if latest is not None else version) + 1):
        infos.append({**commit_info(commit_actions(spark, table, number)), "version": number})
    return infos


def table_id(spark: SparkSession, table: TableRef, version: int | None = None) -> str | None:
    """The table's id at ``version`` (default: the latest), from that version's checksum file;
    None when it cannot be told."""
    crc = latest_checksum(spark, table) if version is None else checksum(spark, table, version)
    return ((crc or {}).get("metadata") or {}).get("id")


def holds_no_files(spark: SparkSession, table: TableRef, version: int | None = None) -> bool:
    """True when the table's checksum file says that ``version`` (default: the latest) holds no
    data files, as a table just created does: no Spark job. False when it holds some, or when
    that cannot be told (no checksum file, a log not readable from here)."""
    crc = latest_checksum(spark, table) if version is None else checksum(spark, table, version)
    return (crc or {}).get("numFiles") == 0


def latest_checksum(spark: SparkSession, table: TableRef) -> dict[str, Any] | None:
    """The checksum file of the table's latest version (:func:`checksum`); None also when its
    log cannot be listed from here."""
    try:
        version = committed_version(spark, table)
    except LookupError:
        return None
    return None if version is None else checksum(spark, table, version)
