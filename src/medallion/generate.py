"""Synthetic input with fault knobs: duplicates, late events, invalid and malformed records.

Files land atomically: each is written under a hidden name (``.name.tmp``) and then renamed,
so a running stream never reads half a file.
"""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta


@dataclass(frozen=True)
class FaultRates:
    """The share of generated records that are re-sent, late, invalid or malformed.

    ``altered_duplicate`` is the share of re-sent events whose copy is not identical: the same
    ``event_id`` with another timestamp, product, user, category or revenue, re-sent in the same
    file or in a later one, where "first arrival wins" decides which copy silver keeps. It is off
    by default: then every copy is identical, so silver does not depend on the order in which
    files or Kafka records arrive (tests that deliver files out of name order, or produce to
    several partitions, compare with an oracle that reads the files in name order).

    ``tied_changes`` is the share of customer changes that come with a twin: the same customer,
    ``sequence_num``, operation and ``updated_at`` instant (possibly written in another zone),
    with other content. README's order decides between them by content, never by arrival.
    """

    duplicate: float = 0.05
    late: float = 0.05
    invalid: float = 0.04
    malformed: float = 0.02
    blank_lines: float = 0.01
    extra_fields: float = 0.05
    crlf_files: float = 0.25
    empty_file: bool = True
    altered_duplicate: float = 0.0
    tied_changes: float = 0.05


def write_file_atomically(
    directory: str,
    name: str,
    lines: list[str],
    crlf: bool = False,
    after_mtime_ns: int | None = None,
) -> str:
    """Write ``lines`` to ``directory/name`` via a hidden temp file and a rename.

    With ``after_mtime_ns``, the file's modification time is made later than that time in whole
    milliseconds (Spark's file source compares milliseconds) before the rename, by waiting for
    the clock: a file source that reads the oldest files first then reads the files in the
    order they were written, whatever its batch size.
    """
    os.makedirs(directory, exist_ok=True)
    final = os.path.join(directory, name)
    temp = os.path.join(directory, f".{name}.{uuid.uuid4().hex}.tmp")
    ending = "\r\n" if crlf else "\n"
    with open(temp, "w", encoding="utf-8", newline="") as handle:
        handle.write("".join(line + ending for line in lines))
        handle.flush()
        os.fsync(handle.fileno())
    if after_mtime_ns is not None:
        while os.stat(temp).st_mtime_ns // 1_000_000 <= after_mtime_ns // 1_000_000:
            time.sleep(0.001)
            os.utime(temp)  # now
    os.replace(temp, final)
    return final


def split_evenly(lines: list[str], parts: int) -> list[list[str]]:
    size = -(-len(lines) // parts) if lines else 0
    return [lines[i * size : (i + 1) * size] for i in range(parts)]


def faulty_line(
    rng: random.Random,
    record: dict,
    faults: FaultRates,
    invalid: Callable[[random.Random, dict], dict],
) -> tuple[str, bool]:
    """``record`` as a JSON line, or, at the fault rates, cut short (malformed) or broken by
    ``invalid``; and whether the line is the record as it is."""
    roll = rng.random()
    if roll < faults.malformed:
        return json.dumps(record)[: rng.randrange(5, 30)], False
    if roll < faults.malformed + faults.invalid:
        return json.dumps(invalid(rng, record)), False
    return json.dumps(record), True


@dataclass
class FaultyFeed:
    """The lines of one dataset in arrival order, with the faults of ``faults``: records sent
    late, cut short (malformed) or broken by the dataset's own ``invalid``, and valid lines
    re-sent byte for byte."""

    rng: random.Random
    faults: FaultRates
    lines: list[str] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)

    def arrival(self, at: datetime) -> datetime:
        """When a record of time ``at`` is sent: ``at``, or for a late one (never the first)
        up to three days earlier."""
        if self.sent and self.rng.random() < self.faults.late:
            return at - timedelta(minutes=self.rng.randrange(1, 3 * 24 * 60))
        return at

    def add(self, record: dict, invalid: Callable[[random.Random, dict], dict]) -> None:
        """Send ``record`` (see :func:`faulty_line`), and now and then a copy of a valid line
        sent before."""
        line, intact = faulty_line(self.rng, record, self.faults, invalid)
        self.lines.append(line)
        if intact:
            self.sent.append(line)
        if self.sent and self.rng.random() < self.faults.duplicate:
            self.lines.append(self.rng.choice(self.sent))


def write_in_files(
    landing: str, dataset: str, prefix: str, lines: list[str], files: int
) -> list[str]:
    """Write ``lines`` to ``landing/dataset/`` in ``files`` files named ``<prefix>-NNNNN.json``,
    landed in name order (each file's modification time after the one before, in
    milliseconds), so the file source reads them in that order. Returns the paths written."""
    written: list[str] = []
    for i, chunk in enumerate(split_evenly(lines, max(files, 1))):
        after = os.stat(written[-1]).st_mtime_ns if written else None
        name = f"{prefix}-{i:05d}.json"
        written.append(write_file_atomically(f"{landing}/{dataset}", name, chunk, False, after))
    return written
