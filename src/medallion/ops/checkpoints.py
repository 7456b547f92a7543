"""Read a stream's checkpoint: which batches it committed and where it stands in its source.

A checkpoint folder holds ``offsets/<batch>`` (what each batch planned to read), ``commits/<batch>``
(batches that finished) and, for a file source, ``sources/0/<batch>[.compact]`` (the files each
batch took). Only local paths (and Unity Catalog volumes through their FUSE mount) are read;
anything else reads as "no checkpoint".
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from urllib.parse import unquote, urlparse


def _batch_ids(folder: str) -> list[int]:
    if not os.path.isdir(folder):
        return []
    return sorted(int(n) for n in os.listdir(folder) if n.isdigit())


def _log_entries(path: str) -> list[str]:
    """The entries of one metadata log file: every line after the ``v1`` header."""
    with open(path, encoding="utf-8") as handle:
        lines = [line.rstrip("\n") for line in handle]
    return [line for line in lines[1:] if line.strip()]


def exists(checkpoint: str) -> bool:
    """True when the stream has started at least once (its ``metadata`` file is there)."""
    return os.path.isfile(os.path.join(checkpoint, "metadata"))


def committed_batch(checkpoint: str) -> int | None:
    """The id of the stream's last committed batch, or None."""
    ids = _batch_ids(os.path.join(checkpoint, "commits"))
    return ids[-1] if ids else None


def planned_batch(checkpoint: str) -> int | None:
    """The id of the last batch the stream planned (its offsets are written), or None."""
    ids = _batch_ids(os.path.join(checkpoint, "offsets"))
    return ids[-1] if ids else None


def source_offsets(checkpoint: str, batch_id: int) -> list[dict | None]:
    """The end offset of each source of one batch (``offsets/<batch>``), parsed from JSON."""
    entries = _log_entries(os.path.join(checkpoint, "offsets", str(batch_id)))
    out: list[dict | None] = []
    for entry in entries[1:]:  # the first entry is the batch's metadata
        out.append(None if entry == "-" else json.loads(entry))
    return out


@dataclass(frozen=True)
class DeltaPosition:
    """Where a Delta source resumes: every version before ``version`` is read.

    ``index`` >= 0 means ``version`` is partly read; ``starting`` means the stream is still
    reading the snapshot of ``version`` it started from.
    """

    version: int
    index: int
    starting: bool


def delta_position(checkpoint: str) -> DeltaPosition | None:
    """The Delta source position a restart resumes from: the end of the last committed batch.

    A batch planned but not committed is replayed from the end of the batch before it; when
    no batch is committed yet, the first planned batch's offset is used (conservatively).
    """
    committed = committed_batch(checkpoint)
    batch = committed if committed is not None else _first(checkpoint)
    if batch is None:
        return None
    offsets = source_offsets(checkpoint, batch)
    offset = offsets[0] if offsets else None
    if not offset or "reservoirVersion" not in offset:
        return None
    return DeltaPosition(
        int(offset["reservoirVersion"]),
        int(offset.get("index", -1)),
        bool(offset.get("isStartingVersion", False)),
    )


def _first(checkpoint: str) -> int | None:
    ids = _batch_ids(os.path.join(checkpoint, "offsets"))
    return ids[0] if ids else None


def local_path(uri: str) -> str:
    """A ``file:`` URI (as the file source logs it) as a plain local path."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return os.path.normpath(unquote(parsed.path))
    return uri


def ingested_files(checkpoint: str, up_to_batch: int | None = None) -> set[str]:
    """The files a file-source stream has taken, by batches up to ``up_to_batch`` (inclusive).

    Read from ``sources/0``: every batch file and every ``.compact`` file (which repeats the
    batches before it), so old batch files that were cleaned up lose nothing.
    """
    folder = os.path.join(checkpoint, "sources", "0")
    if not os.path.isdir(folder):
        return set()
    files: set[str] = set()
    for name in os.listdir(folder):
        stem = name.removesuffix(".compact")
        if not stem.isdigit():
            continue
        for entry in _log_entries(os.path.join(folder, name)):
            record = json.loads(entry)
            if up_to_batch is None or int(record.get("batchId", 0)) <= up_to_batch:
                files.add(local_path(record["path"]))
    return files


def landed_files(folder: str) -> set[str]:
    """The files of a landing folder the file source would read (not hidden, not ``_``)."""
    if not os.path.isdir(folder):
        return set()
    return {
        os.path.normpath(os.path.join(folder, name))
        for name in os.listdir(folder)
        if not name.startswith((".", "_")) and os.path.isfile(os.path.join(folder, name))
    }
