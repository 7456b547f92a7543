"""A set of keys, each as its two 64-bit hashes, in a few sorted runs: in the driver's memory up
to a bound, and beyond it in files of a local folder that the process maps into memory.

A run is sorted by its first hash, so it is bucketed by hash: a lookup binary-searches each
run and reads only the pages (4 KiB, 512 hashes) that its keys fall into. A mapped run's pages
belong to the operating system's file cache, which keeps the ones batches touch and gives the
others back under pressure; the arrays the index holds itself stay below ``memory_bytes``
(``MEDALLION_KEY_INDEX_MEMORY_MB``, :data:`DEFAULT_MEMORY_MB`), whatever the table's size.

A run's file is one ``.npy`` array of shape (2, n): its first hashes, then its second ones,
each contiguous. A file is written under a temporary name and renamed, and never changed.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

KEY_BYTES = 16
DEFAULT_MEMORY_MB = 256
MEMORY_VARIABLE = "MEDALLION_KEY_INDEX_MEMORY_MB"
# Keys taken from each run per step of a merge into a file: 16 MiB per run in memory.
MERGE_CHUNK_KEYS = 1 << 20


def memory_bound() -> int:
    """The bytes an index may hold in memory: ``MEDALLION_KEY_INDEX_MEMORY_MB`` MiB, else
    :data:`DEFAULT_MEMORY_MB`."""
    text = os.environ.get(MEMORY_VARIABLE, "").strip()
    try:
        megabytes = float(text) if text else DEFAULT_MEMORY_MB
    except ValueError:
        raise ValueError(f"{MEMORY_VARIABLE} must be a number of MiB, not {text!r}") from None
    if megabytes <= 0:
        raise ValueError(f"{MEMORY_VARIABLE} must be positive, not {text!r}")
    return int(megabytes * 2**20)


@dataclass
class Run:
    """Keys sorted by (first, second) hash. ``file``: the run's file in the index's folder,
    once it has one; its arrays are then either still in memory or mapped from it."""

    h1: np.ndarray
    h2: np.ndarray
    file: str | None = None

    def __len__(self) -> int:
        return len(self.h1)

    @property
    def mapped(self) -> bool:
        return isinstance(self.h1, np.memmap)


def sorted_run(h1: np.ndarray, h2: np.ndarray) -> Run:
    order = np.lexsort((h2, h1))
    return Run(h1[order], h2[order])


def run_file_name() -> str:
    return f"run-{uuid.uuid4().hex}.npy"


def map_run(folder: str, name: str, keys: int | None = None) -> Run:
    """The run kept in ``folder/name``, mapped into memory."""
    array = np.load(os.path.join(folder, name), mmap_mode="r")
    if array.ndim != 2 or array.shape[0] != 2 or array.dtype != np.int64:
        raise ValueError(f"{name} is not a key run: {array.dtype} {array.shape}")
    if keys is not None and array.shape[1] != keys:
        raise ValueError(f"{name} holds {array.shape[1]} keys, not {keys}")
    return Run(array[0], array[1], name)


def write_run(folder: str, parts: Iterable[Run], keys: int) -> Run:
    """Write ``parts``, sorted and in ascending order of their keys, as one run of ``keys``
    keys in ``folder``; the run, mapped."""
    os.makedirs(folder, exist_ok=True)
    name = run_file_name()
    temporary = os.path.join(folder, f".{name}.tmp")
    out = np.lib.format.open_memmap(temporary, mode="w+", dtype=np.int64, shape=(2, keys))
    try:
        at = 0
        for part in parts:
            out[0, at : at + len(part)] = part.h1
            out[1, at : at + len(part)] = part.h2
            at += len(part)
        if at != keys:
            raise ValueError(f"a run of {keys} keys was given {at}")
        out.flush()
    except BaseException:
        os.remove(temporary)
        raise
    finally:
        del out
    os.replace(temporary, os.path.join(folder, name))
    return map_run(folder, name, keys)


def _merged_parts(a: Run, b: Run) -> Iterable[Run]:
    """The keys of two runs in order, a bounded chunk of each at a time."""
    i = j = 0
    while i < len(a) or j < len(b):
        # Every key whose first hash is at most the smaller chunk end goes in this step.
        bound = min(
            run.h1[min(at + MERGE_CHUNK_KEYS, len(run)) - 1]
            for run, at in ((a, i), (b, j))
            if at < len(run)
        )
        i_end = int(np.searchsorted(a.h1, bound, "right")) if i < len(a) else i
        j_end = int(np.searchsorted(b.h1, bound, "right")) if j < len(b) else j
        yield sorted_run(
            np.concatenate([a.h1[i:i_end], b.h1[j:j_end]]),
            np.concatenate([a.h2[i:i_end], b.h2[j:j_end]]),
        )
        i, j = i_end, j_end


class KeyIndex:
    """A set of keys as sorted runs.

    Membership is a binary search per run. A new run is merged into the one before it while it
    is at least half its size, so there are at most log2(n) runs and a key is re-sorted
    O(log n) times in all. With a ``folder``, runs beyond ``memory_bytes`` in all are written
    there and mapped, and a merge whose result would pass the bound is written there a chunk at
    a time; without one, every run is held in memory.
    """

    def __init__(
        self,
        runs: Sequence[Run] = (),
        folder: str | None = None,
        memory_bytes: int | None = None,
    ) -> None:
        self.runs: list[Run] = list(runs)
        self.folder = folder
        self.memory_bytes = memory_bound() if memory_bytes is None else memory_bytes

    def __len__(self) -> int:
        return sum(len(run) for run in self.runs)

    @property
    def memory_held(self) -> int:
        """Bytes of the runs held in memory rather than mapped from their files."""
        return KEY_BYTES * sum(len(run) for run in self.runs if not run.mapped)

    def add(self, h1: np.ndarray, h2: np.ndarray) -> None:
        """Add keys (not already held)."""
        if len(h1):
            self.runs.append(sorted_run(h1, h2))
        while len(self.runs) > 1 and 2 * len(self.runs[-1]) >= len(self.runs[-2]):
            newer, older = self.runs.pop(), self.runs.pop()
            self.runs.append(self._merged(older, newer))
        self._bound_memory()

    def _merged(self, a: Run, b: Run) -> Run:
        if self.folder is not None and (
            a.mapped or b.mapped or KEY_BYTES * (len(a) + len(b)) > self.memory_bytes
        ):
            return write_run(self.folder, _merged_parts(a, b), len(a) + len(b))
        return sorted_run(np.concatenate([a.h1, b.h1]), np.concatenate([a.h2, b.h2]))

    def _bound_memory(self) -> None:
        """Map the largest runs held in memory from files (written if they have none yet) until
        the rest fits the bound."""
        while self.folder is not None and self.memory_held > self.memory_bytes:
            i = max(
                (i for i, run in enumerate(self.runs) if not run.mapped),
                key=lambda i: len(self.runs[i]),
            )
            run = self.runs[i]
            self.runs[i] = (
                map_run(self.folder, run.file, len(run))
                if run.file is not None
                else write_run(self.folder, [run], len(run))
            )

    def contains(self, h1: np.ndarray, h2: np.ndarray) -> np.ndarray:
        """For each key, whether the index holds it."""
        # Looked up in ascending order, so that consecutive searches touch nearby pages.
        order = np.argsort(h1, kind="stable")
        s1, s2 = h1[order], h2[order]
        found = np.zeros(len(h1), dtype=bool)
        for run in self.runs:
            left = np.searchsorted(run.h1, s1, "left")
            right = np.searchsorted(run.h1, s1, "right")
            one = (right - left) == 1
            found[one] |= run.h2[left[one]] == s2[one]
            # Keys whose first hash several held keys share: compare each.
            for i in np.nonzero((right - left) > 1)[0]:
                found[i] |= bool(np.any(run.h2[left[i] : right[i]] == s2[i]))
        held = np.empty(len(h1), dtype=bool)
        held[order] = found
        return held
