"""Read a stream's checkpoint: which batches it committed and where it stands in its source.

A checkpoint folder holds ``offsets/<batch>`` (what each batch planned to read), ``commits/<batch>``
(batches that finished) and, for a file source, ``sources/0/<batch>[.compact]`` (the files each
batch took). Only local paths (and Unity Catalog volumes through their FUSE mount) are read;
anything else reads as "no checkpoint".
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
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


def source_count(checkpoint: str) -> int | None:
    """How many sources the stream's last planned batch read (None: no batch yet, or the
    checkpoint cannot be read as local files)."""
    try:
        batch = planned_batch(checkpoint)
        return None if batch is None else len(source_offsets(checkpoint, batch))
    except OSError:
        return None


@dataclass(frozen=True)
class DeltaPosition:
    """Where a Delta source resumes: every version before ``version`` is read.

    ``index`` >= 0 means ``version`` is partly read; ``starting`` means the stream is still
    reading the snapshot of ``version`` it started from. ``table_id`` is the id of the table
    the offset belongs to (``reservoirId``).
    """

    version: int
    index: int
    starting: bool
    table_id: str | None = None


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
        offset.get("reservoirId"),
    )


def source_kind(checkpoint: str) -> str | None:
    """What the stream reads, from the offset of its last planned batch: ``"files"``
    (``logOffset``), ``"delta"`` (``reservoirVersion``) or ``"kafka"`` (topic -> partition ->
    offset); None before a batch is planned, or for another source. Raises OSError or
    ValueError for an offsets file it cannot read."""
    batch = planned_batch(checkpoint)
    offsets = [] if batch is None else source_offsets(checkpoint, batch)
    offset = offsets[0] if offsets else None
    if not isinstance(offset, dict) or not offset:
        return None
    if "logOffset" in offset:
        return "files"
    if "reservoirVersion" in offset:
        return "delta"
    return "kafka" if all(isinstance(p, dict) for p in offset.values()) else None


def kafka_offsets(checkpoint: str) -> dict[str, dict[int, int]] | None:
    """Where a Kafka-source stream resumes, topic -> partition -> offset: the end offsets of its
    last committed batch or, before one is committed, the offsets it started at (the source's
    ``sources/0/0``); None when neither is there. Raises OSError or ValueError for a file it
    cannot read."""
    committed = committed_batch(checkpoint)
    if committed is not None:
        offsets = source_offsets(checkpoint, committed)
        offset = offsets[0] if offsets else None
    else:
        path = os.path.join(checkpoint, "sources", "0", "0")
        if not os.path.isfile(path):
            return None
        with open(path, encoding="utf-8") as handle:  # a NUL byte, "v1", then the JSON
            offset = json.loads(handle.read().lstrip("\0").split("\n", 1)[1])
    if not isinstance(offset, dict):
        return None
    return {
        str(topic): {int(p): int(o) for p, o in partitions.items()}
        for topic, partitions in offset.items()
    }


def _first(checkpoint: str) -> int | None:
    ids = _batch_ids(os.path.join(checkpoint, "offsets"))
    return ids[0] if ids else None


def local_path(uri: str) -> str:
    """A ``file:`` URI (as the file source logs it) as a plain local path."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return os.path.normpath(unquote(parsed.path))
    return uri


def source_log(checkpoint: str) -> list[tuple[str, int, int]]:
    """What a file-source stream took: (path as logged, modification time in epoch ms, batch).

    Read from ``sources/0``: every batch file and every ``.compact`` file (which repeats the
    batches before it), so old batch files that were cleaned up lose nothing. Paths are URIs
    such as ``file:///landing/events/a.json``, as bronze's ``_source_file`` holds them.
    """
    folder = os.path.join(checkpoint, "sources", "0")
    if not os.path.isdir(folder):
        return []
    entries: dict[str, tuple[str, int, int]] = {}
    for name in os.listdir(folder):
        stem = name.removesuffix(".compact")
        if not stem.isdigit():
            continue
        for entry in _log_entries(os.path.join(folder, name)):
            record = json.loads(entry)
            path = record["path"]
            entries[path] = (path, int(record.get("timestamp", 0)), int(record.get("batchId", 0)))
    return list(entries.values())


def read_folder(checkpoint: str) -> str | None:
    """The folder a file-source stream reads, as a local path: that of the newest file its log
    records; None before it has taken a file, or when that file is not a local path."""
    logged = source_log(checkpoint)
    if not logged:
        return None
    newest = local_path(max(logged, key=lambda entry: (entry[2], entry[0]))[0])
    return os.path.dirname(newest) if os.path.isabs(newest) else None


def ingested_file_times(checkpoint: str, up_to_batch: int | None = None) -> dict[str, int]:
    """The files a file-source stream has taken, by batches up to ``up_to_batch`` (inclusive),
    each as a local path with its modification time (epoch ms) when it was read."""
    return {
        local_path(path): mtime
        for path, mtime, batch in source_log(checkpoint)
        if up_to_batch is None or batch <= up_to_batch
    }


def ingested_files(checkpoint: str, up_to_batch: int | None = None) -> set[str]:
    """The files a file-source stream has taken, by batches up to ``up_to_batch`` (inclusive)."""
    return set(ingested_file_times(checkpoint, up_to_batch))


# The size of every ingested file, recorded beside the file source's log (which keeps only the
# modification time): one JSON line per file, ``{"path", "mtime", "size"}``.
LANDED_SIZES = "_medallion_landed_sizes.jsonl"


@dataclass(frozen=True)
class ReplacedFile:
    """A landed file whose modification time or size changed after the stream read it."""

    path: str
    read_mtime_ms: int
    mtime_ms: int
    read_size: int | None
    size: int

    def describe(self) -> str:
        """``read at <time> (<size> bytes), now <time> (<size> bytes)``."""

        def at(ms: int, size: int | None) -> str:
            when = datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="seconds")
            return when.replace("+00:00", "Z") + ("" if size is None else f", {size} bytes")

        return (
            f"{self.path} (read with mtime {at(self.read_mtime_ms, self.read_size)}; "
            f"now {at(self.mtime_ms, self.size)})"
        )


def replaced_files(checkpoint: str, record: bool = True) -> list[ReplacedFile]:
    """The files a file-source stream read whose modification time or size has changed since.

    The file source never reads a path twice, so such a file's new content would never be read.
    The modification time read comes from the source's log; sizes are recorded here, in
    ``<checkpoint>/_medallion_landed_sizes.jsonl``, the first time a read file is checked
    (with ``record``; ``status`` only reads). Files no longer in the landing folder are not
    replaced ones. Only local (or FUSE-mounted) landing folders are checked.
    """
    committed = committed_batch(checkpoint)
    if committed is None:
        return []
    # A batch planned but not committed reads its files again, as they are, when replayed.
    read = ingested_file_times(checkpoint, up_to_batch=committed)
    sizes_path = os.path.join(checkpoint, LANDED_SIZES)
    known, known_mtimes = _recorded_reads(sizes_path)
    replaced, first_seen = [], []
    for path, logged_mtime in sorted(read.items()):
        try:
            stat = os.stat(path)
        except OSError:
            continue  # gone, or not a local path
        mtime = stat.st_mtime_ns // 1_000_000  # as Hadoop reports it: whole milliseconds
        read_mtime = known_mtimes.get(path, logged_mtime)
        size = known.get(path)
        if mtime != read_mtime or (size is not None and size != stat.st_size):
            replaced.append(ReplacedFile(path, read_mtime, mtime, size, stat.st_size))
        elif size is None:
            first_seen.append({"path": path, "mtime": mtime, "size": stat.st_size})
    if record and first_seen:
        with open(sizes_path, "a", encoding="utf-8") as handle:
            handle.writelines(json.dumps(entry) + "\n" for entry in first_seen)
    return replaced


def _recorded_reads(sizes_path: str) -> tuple[dict[str, int], dict[str, int]]:
    """(size, modification time) of each read file, as recorded beside the log; later lines
    win (see :func:`note_pending_reads`)."""
    sizes: dict[str, int] = {}
    mtimes: dict[str, int] = {}
    if os.path.isfile(sizes_path):
        with open(sizes_path, encoding="utf-8") as handle:
            for line in handle:
                with contextlib.suppress(ValueError, KeyError):
                    entry = json.loads(line)
                    sizes[entry["path"]] = int(entry["size"])
                    mtimes[entry["path"]] = int(entry["mtime"])
    return sizes, mtimes


def pending_files(checkpoint: str) -> tuple[int | None, list[tuple[str, int]]]:
    """The batch planned but not committed, and its files as (path as logged, modification
    time when listed); (None, []) when every planned batch is committed."""
    planned, committed = planned_batch(checkpoint), committed_batch(checkpoint)
    if planned is None or (committed is not None and planned <= committed):
        return None, []
    done = -1 if committed is None else committed
    return planned, [(path, mtime) for path, mtime, batch in source_log(checkpoint) if batch > done]


def note_pending_reads(checkpoint: str, pending: list[tuple[str, int]]) -> None:
    """The files of a batch planned but not committed (``pending``, from
    :func:`pending_files`) are read as they are now when the batch is replayed: record their
    time and size now as the ones read, when they changed since they were listed (a file put
    back after it went missing), so they are not taken for replaced."""
    changed = []
    for path, listed_mtime in pending:
        try:
            stat = os.stat(local_path(path))
        except OSError:
            continue
        mtime = stat.st_mtime_ns // 1_000_000
        if mtime != listed_mtime:
            changed.append({"path": local_path(path), "mtime": mtime, "size": stat.st_size})
    if changed:
        with open(os.path.join(checkpoint, LANDED_SIZES), "a", encoding="utf-8") as handle:
            handle.writelines(json.dumps(entry) + "\n" for entry in changed)


def unread_files(checkpoint: str, landed: set[str]) -> set[str]:
    """The ``landed`` files (:func:`landed_files`) that the stream's committed batches have not
    taken."""
    return landed - ingested_files(checkpoint, committed_batch(checkpoint))


def landed_files(folder: str) -> set[str]:
    """The files of a landing folder the file source would read (not hidden, not ``_``)."""
    if not os.path.isdir(folder):
        return set()
    return {
        os.path.normpath(os.path.join(folder, name))
        for name in os.listdir(folder)
        if not name.startswith((".", "_")) and os.path.isfile(os.path.join(folder, name))
    }
