"""Checkpoint hygiene before a query starts."""

from __future__ import annotations

import logging
import os
import re

log = logging.getLogger(__name__)

# Spark writes each checkpoint log entry (offsets/N, commits/N, sources/*/N) to a hidden temp
# file and renames it into place. A process killed between the two leaves ``.N.<uuid>.tmp``
# (and its ``.crc``) behind: an entry that was never written.
_ABANDONED_WRITE = re.compile(r"^\.{1,2}\d+\.[0-9a-f-]{36}\.tmp(\.crc)?$")


def _local_path(checkpoint: str) -> str | None:
    if checkpoint.startswith("file:"):
        return checkpoint[len("file:") :]
    return None if "://" in checkpoint or checkpoint.startswith("dbfs:") else checkpoint


def discard_abandoned_writes(checkpoint: str) -> list[str]:
    """Delete the temp files of checkpoint log writes that a crash cut short; return their paths.

    Spark 4 refuses to start batch 0 when ``offsets/`` is not empty
    (``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``), so a SIGKILL during the very first offset
    write would otherwise stop the stream from ever starting again. Only call this before the
    query starts: no writer is alive then. Object stores (no rename) are left alone.
    """
    root = _local_path(checkpoint)
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
