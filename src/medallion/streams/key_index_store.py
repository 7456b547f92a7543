"""A stream's key index (streams/known_keys.py) kept in its checkpoint folder, so that the next
process reads it back instead of reading every key of the table again.

The folder holds the index's sorted runs, one ``.npy`` file each (streams/key_index.py), and
``index.json``: the table's id, the table version the runs reflect, and each run's file and
size. The next process maps the runs' files rather than reading them in (a lookup reads only
the pages its keys fall into). The runs are taken back only when the table is the same one (its
id) and no commit after that version changed its rows: commits with ``dataChange=false`` only
(OPTIMIZE, auto-compaction, schema changes, VACUUM) keep the keys as they were. Any other
commit — this stream's write after the index was last kept, a DELETE, another job's append, a
RESTORE — makes the stream read the keys from the table again, as it would without this store.

So a kept index is never wrong, only sometimes unusable: a save that fails or falls behind
costs one read of the table's keys, never a key.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Sequence

from pyspark.sql import SparkSession

from medallion.delta_log import commits_after, table_id
from medallion.sql_names import TableRef
from medallion.streams.key_index import Run, map_run, write_run

log = logging.getLogger(__name__)

_MANIFEST = "index.json"
# The folder a read of a table's keys writes its buckets in (known_keys.py).
READ_SCRATCH_PREFIX = "_read-"
# Bumped whenever the hashing or the file layout changes: an older index is then read again.
# 1: one .npz file per run; 2: one .npy array of shape (2, n), mapped.
_FORMAT = 2


class KeyIndexStore:
    """The files of one key index in a local ``folder``: :meth:`load` and :meth:`save`."""

    def __init__(self, folder: str, columns: Sequence[str]) -> None:
        self.folder, self.columns = folder, list(columns)

    def load(self, spark: SparkSession, table: TableRef) -> tuple[list[Run], int, str] | None:
        """The kept runs (mapped from their files), the table version they now reflect and the
        table's id; None when there are none, or they may not hold."""
        path = os.path.join(self.folder, _MANIFEST)
        if not os.path.exists(path):  # none kept yet: a new stream, or a table never read
            return None
        try:
            with open(path, encoding="utf-8") as handle:
                manifest = json.load(handle)
            if manifest.get("format") != _FORMAT or manifest.get("columns") != self.columns:
                return None
            version = int(manifest["version"])
            commits = commits_after(spark, table, version)
            latest = commits[-1].version if commits else version
            changed = next((c.version for c in commits if c.changes_data), None)
            if changed is not None:
                log.debug("%s: version %d changed its rows; keys read again", table.key, changed)
                return None
            if (
                manifest["table_id"] is None
                or table_id(spark, table, latest) != manifest["table_id"]
            ):
                return None
            runs = [map_run(self.folder, run["file"], int(run["keys"])) for run in manifest["runs"]]
        except (OSError, LookupError, KeyError, TypeError, ValueError):
            log.debug("no usable key index in %s", self.folder, exc_info=True)
            return None
        return runs, latest, manifest["table_id"]

    def save(
        self,
        runs: Sequence[Run],
        version: int,
        table: str,
    ) -> None:
        """Keep ``runs`` as reflecting ``version`` of the table whose id is ``table``: the runs
        without a file are written (and keep their arrays in memory), then the manifest, then
        files no run uses are deleted. Every run's file is in this store's folder."""
        os.makedirs(self.folder, exist_ok=True)
        for run in runs:
            if run.file is None:
                run.file = write_run(self.folder, [run], len(run)).file
        names = [run.file for run in runs]
        manifest = {
            "format": _FORMAT,
            "columns": self.columns,
            "table_id": table,
            "version": version,
            "runs": [{"file": run.file, "keys": len(run)} for run in runs],
        }
        temporary = os.path.join(self.folder, f".{_MANIFEST}.tmp")
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(manifest, handle)
        os.replace(temporary, os.path.join(self.folder, _MANIFEST))
        for stale in set(os.listdir(self.folder)) - {*names, _MANIFEST}:
            path = os.path.join(self.folder, stale)
            if stale.endswith((".npy", ".npz", ".tmp")):
                os.remove(path)
            elif stale.startswith(READ_SCRATCH_PREFIX):  # left by a read that was stopped
                shutil.rmtree(path, ignore_errors=True)
