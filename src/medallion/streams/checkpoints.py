"""Checkpoint hygiene before a query starts: abandoned log writes, lost checkpoints."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence

from pyspark.sql import SparkSession

from medallion.config import Config
from medallion.storage import list_names, local_path
from medallion.streams.checkpoint_files import replaced_files
from medallion.tables import holds_data

log = logging.getLogger(__name__)

# Spark writes each checkpoint log entry (offsets/N, commits/N, sources/*/N) to a hidden temp
# file and renames it into place. A process killed between the two leaves ``.N.<uuid>.tmp``
# (and its ``.crc``) behind: an entry that was never written.
_ABANDONED_WRITE = re.compile(r"^\.{1,2}\d+\.[0-9a-f-]{36}\.tmp(\.crc)?$")


def discard_abandoned_writes(checkpoint: str) -> list[str]:
    """Delete the temp files of checkpoint log writes that a crash cut short; return their paths.

    Spark 4 refuses to start batch 0 when ``offsets/`` is not empty
    (``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``), so a SIGKILL during the very first offset
    write would otherwise stop the stream from ever starting again. Only call this before the
    query starts: no writer is alive then. Object stores (no rename) are left alone.
    """
    root = local_path(checkpoint)
    if root is None or not os.path.isdir(root):
        return []
    removed = []
    for folder, _dirs, files in os.walk(root):
        if os.path.relpath(folder, root).split(os.sep)[0] == "state":
            continue  # the state store manages its own files
        for name in files:
            if _ABANDONED_WRITE.match(name):
                path = os.path.join(folder, name)
                os.remove(path)
                removed.append(path)
    if removed:
        log.warning("removed %d abandoned checkpoint writes under %s", len(removed), checkpoint)
    return removed


def checkpoint_started(spark: SparkSession, checkpoint: str) -> bool | None:
    """True when a query has started from ``checkpoint`` (its ``metadata`` file is there);
    None when the folder cannot be listed from here."""
    names = list_names(spark, checkpoint)
    return None if names is None else "metadata" in names


def lost_checkpoint(
    spark: SparkSession, config: Config, stream: str, writes: Sequence[str]
) -> str | None:
    """Why ``stream`` must not start, when its checkpoint is gone while a table it writes
    already holds data: starting from nothing would read its whole input again and write it
    twice (appends, additive MERGEs). None when it may start."""
    checkpoint = config.checkpoint(stream)
    if checkpoint_started(spark, checkpoint) is not False:
        return None
    written = [key for key in writes if holds_data(spark, config.table(key))]
    if not written:
        return None
    table = config.table(written[0])
    return (
        f"stream '{stream}' has no checkpoint at {checkpoint}, but {', '.join(written)} already "
        "holds what it wrote: starting it from nothing would read its input again and write it "
        "twice. If the checkpoint was moved, put it back; to rebuild instead, run "
        f"`medallion reset --lake {config.lake} --layer {table.layer} --table {table.key}` "
        "(docs/operations.md)"
    )


def replaced_landing_files(config: Config, stream: str, reads: str) -> str | None:
    """Why ``stream`` must stop: a landing file it read was replaced under the same name, so
    its new content would never be read. None when nothing was replaced (or the stream does
    not read local landing files: Kafka, Auto Loader and remote folders are not checked)."""
    checkpoint = local_path(config.checkpoint(stream))
    files_source = config.source == "files" and config.file_source == "files"
    if not reads.startswith("landing/") or not files_source or checkpoint is None:
        return None
    replaced = replaced_files(checkpoint)
    if not replaced:
        return None
    first = replaced[0]
    name = os.path.basename(first.path)
    stem, extension = os.path.splitext(name)
    what = (
        "a landing file was"
        if len(replaced) == 1
        else f"{len(replaced)} landing files were (the first shown)"
    )
    return (
        f"stream '{stream}': {what} replaced under the same name after it was ingested: "
        f"{first.describe()}. A path is never read twice, so its new content would be lost. "
        f"Land the new version under a new name (for example `mv {name} {stem}.v2{extension}`): "
        "it is read as a new file, and silver drops the events it already has; or move it out "
        "of the landing folder to leave it unread (docs/operations.md)"
    )
