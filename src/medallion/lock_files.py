"""A lock file (medallion/locks.py): who holds it, created whole or not at all, and taken
over atomically once stale.

A lock file is created exclusively: written aside, then hard-linked into place, which fails
when the lock exists (``O_EXCL`` where hard links are not supported, as on some FUSE mounts).

A stale lock is taken over atomically: of the runs that find the same stale lock, one takes
it. Removing a file is not conditional on what it holds, so a taker first claims that stale
lock: it creates ``<stream>.lock.takeover-<id>`` exclusively, as a lock is created, ``<id>``
naming the stale lock by its holder's run id and its last heartbeat (a lock taken again
after a pause is another lock: its heartbeat is newer). Only the claim's creator removes the
stale lock, once it has read that the lock is still that one; nobody can change it meanwhile:
a lock cannot be created over it, its other takers wait for the claim, and its holder is dead
or has stopped writing (its lease lapsed). Then the taker removes its claim and creates its own
lock exclusively, which fails if another run created one first. A taker that lost the claim
reads the lock again: it finds the new holder, and is refused. A claim left by a run that
crashed in those few milliseconds goes stale as a lock does, and is taken over the same way.

Reading the stale lock, then renaming it aside, was not atomic: of two runs that read it, one
could rename aside the new lock the other had just created, and both would write.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass

from medallion.errors import ConfigError

log = logging.getLogger(__name__)


class LockHeld(ConfigError):
    """Another live run holds a stream's lock; the message names it."""


@dataclass(frozen=True)
class Holder:
    """Who holds a lock: what its file says."""

    host: str
    pid: int
    started_at: str
    command: str
    run_id: str
    process_start: str | None = None

    def describe(self) -> str:
        """``host h, pid 42, since 2026-11-23T10:00:00Z (medallion run)``."""
        return f"host {self.host}, pid {self.pid}, since {self.started_at} ({self.command})"


def process_start(pid: int) -> str | None:
    """The start time of a process in clock ticks since boot (Linux), to tell a reused pid."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            stat = handle.read()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[19]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, someone else's
    return True


def read_lock(path: str) -> tuple[Holder | None, int]:
    """The holder in a lock file and the time of its last heartbeat (ns), both from the one
    file opened; (None, 0) when there is none."""
    try:
        with open(path, encoding="utf-8") as handle:
            beat = os.fstat(handle.fileno()).st_mtime_ns
            text = handle.read()
    except FileNotFoundError:
        return None, 0
    try:
        data = json.loads(text)
        return Holder(**data), beat
    except (ValueError, TypeError):
        return Holder("?", -1, "?", "?", "unreadable"), beat


def is_stale(holder: Holder, beat_ns: int, lease_seconds: float) -> bool:
    """A lock its holder left: on this host, its process is gone (or is another now); from
    another host, its last heartbeat is older than ``lease_seconds``."""
    if holder.host == socket.gethostname() and holder.pid > 0:
        if not _pid_alive(holder.pid):
            return True
        now_start = process_start(holder.pid)
        return bool(holder.process_start and now_start and now_start != holder.process_start)
    return time.time() - beat_ns / 1e9 > lease_seconds


def create_exclusively(path: str, content: str) -> bool:
    """Create ``path`` holding ``content`` unless it exists; the file appears complete."""
    staged = f"{path}.{uuid.uuid4().hex}.tmp"
    with open(staged, "w", encoding="utf-8") as handle:
        handle.write(content)
        handle.flush()
        os.fsync(handle.fileno())
    try:
        os.link(staged, path)  # atomic, and fails when the lock exists
        return True
    except FileExistsError:
        return False
    except OSError:  # a file system without hard links (some FUSE mounts): O_EXCL instead
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(content)
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(staged)


# Claims of claims: each level takes a run that crashed in the middle of a takeover.
MAX_CLAIM_DEPTH = 3


def create_or_take_over(
    path: str, content: str, lease_seconds: float, depth: int = 0
) -> Holder | None:
    """Create the lock file ``path`` holding ``content``, taking over a stale one atomically
    (as the module's docstring says): None once created, else the live holder that keeps it."""
    for _ in range(10_000):
        if create_exclusively(path, content):
            return None
        holder, beat = read_lock(path)
        if holder is None:
            continue  # released meanwhile: try again
        if not is_stale(holder, beat, lease_seconds) or depth >= MAX_CLAIM_DEPTH:
            return holder
        stale = hashlib.sha256(f"{holder.run_id}:{beat}".encode()).hexdigest()[:16]
        claim = f"{path}.takeover-{stale}"
        if create_or_take_over(claim, content, lease_seconds, depth + 1) is not None:
            time.sleep(0.01)  # another run is taking this lock over: see who holds it then
            continue
        try:
            if read_lock(path) == (holder, beat):  # still the stale lock: ours to remove
                os.remove(path)
                log.warning("took over %s from %s", os.path.basename(path), holder.describe())
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(claim)
    raise LockHeld(f"could not take the lock {path}: it keeps changing")


def remove_old_claims(path: str, lease_seconds: float) -> None:
    """Remove the claims on the lock ``path`` that runs which crashed while taking it over
    left, older than ``lease_seconds``."""
    prefix = f"{os.path.basename(path)}.takeover-"
    with contextlib.suppress(OSError), os.scandir(os.path.dirname(path)) as entries:
        for entry in entries:
            if entry.name.startswith(prefix):
                with contextlib.suppress(OSError):
                    if time.time() - entry.stat().st_mtime > lease_seconds:
                        os.remove(entry.path)
