"""A stream's key index (streams/known_keys.py) kept in its checkpoint folder, so that the next
process reads it back instead of reading every key of the table again.

The folder holds the index's sorted runs, one ``.npz`` file each, and ``index.json``: the
table's id, the table version the runs reflect, and each run's file and size. The runs are
taken back only when the table is the same one (its id) and no commit after that version
changed its rows: commits with ``dataChange=false`` only (OPTIMIZE, auto-compaction, schema
changes, VACUUM) keep the keys as they were. Any other commit — this stream's write after the
index was last kept, a DELETE, another job's append, a RESTORE — makes the stream read the keys
from the table again, as it would without this store.

So a kept index is never wrong, only sometimes unusable: a save that fails or falls behind
costs one read of the table's keys, never a key.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Sequence

import numpy as np
from pyspark.sql import SparkSession

from medallion.delta_log import commits_after, table_id
from medallion.sql_names import TableRef

log = logging.getLogger(__name__)

_MANIFEST = "index.json"
# Bumped whenever the hashing or the file layout changes: an older index is then read again.
_FORMAT = 1


class KeyIndexStore:
    """The files of one key index in a local ``folder``: :meth:`load` and :meth:`save`."""

    def __init__(self, folder: str, columns: Sequence[str]) -> None:
        self.folder, self.columns = folder, list(columns)

    def load(
        self, spark: SparkSession, table: TableRef
    ) -> tuple[list[tuple[np.ndarray, np.ndarray, str]], int, str] | None:
        """The kept runs (each as its two hash arrays and file name), the table version they
        now reflect and the table's id; None when there are none, or they may not hold."""
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
            runs = [self._read_run(run["file"], int(run["keys"])) for run in manifest["runs"]]
        except (OSError, LookupError, KeyError, TypeError, ValueError):
            log.debug("no usable key index in %s", self.folder, exc_info=True)
            return None
        return runs, latest, manifest["table_id"]

    def _read_run(self, name: str, keys: int) -> tuple[np.ndarray, np.ndarray, str]:
        with np.load(os.path.join(self.folder, name)) as arrays:
            h1, h2 = arrays["h1"], arrays["h2"]
        if len(h1) != keys or len(h2) != keys:
            raise ValueError(f"{name} holds {len(h1)} keys, not {keys}")
        return h1, h2, name

    def save(
        self,
        runs: Sequence[tuple[np.ndarray, np.ndarray, str | None]],
        version: int,
        table: str,
    ) -> list[str]:
        """Keep ``runs`` as reflecting ``version`` of the table whose id is ``table``: the runs
        without a file are written, then the manifest, then files no run uses are deleted.
        Returns each run's file name."""
        os.makedirs(self.folder, exist_ok=True)
        names = []
        for h1, h2, name in runs:
            if name is None:
                name = f"run-{uuid.uuid4().hex}.npz"
                with open(os.path.join(self.folder, name), "wb") as handle:
                    np.savez(handle, h1=h1, h2=h2)
            names.append(name)
        manifest = {
            "format": _FORMAT,
            "columns": self.columns,
            "table_id": table,
            "version": version,
            "runs": [{"file": n, "keys": len(r[0])} for n, r in zip(names, runs, strict=True)],
        }
        temporary = os.path.join(self.folder, f".{_MANIFEST}.tmp")
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(manifest, handle)
        os.replace(temporary, os.path.join(self.folder, _MANIFEST))
        for stale in set(os.listdir(self.folder)) - {*names, _MANIFEST}:
            if stale.endswith(".npz"):
                os.remove(os.path.join(self.folder, stale))
        return names
