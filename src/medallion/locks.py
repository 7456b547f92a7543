"""One writer per stream: a lease file for each stream a run (or a reset) works on.

A run holds ``<checkpoints>/_locks/<stream>.lock`` for every stream it starts, for as long
as it runs, and ``medallion reset`` holds the locks of the streams it deletes. A second
writer is refused with the holder's host, pid and start time. The file is created atomically
(complete, or not at all), and the holder touches it every ``HEARTBEAT_SECONDS``.

A lock left behind by a crash is taken over safely:

- on the same host, as soon as its pid is gone (or is another process now: the process's
  start time is part of the lock);
- from another host, once its heartbeat is older than ``LEASE_SECONDS``.

Locks are per stream, not per lake, so the bundle's streaming job can run its layers as
concurrent tasks. They need a path this process can open as a file: a local folder, or a Unity
Catalog volume through its FUSE mount. Elsewhere (``s3://``, ``dbfs:``) no lock is taken, and
the jobs' ``max_concurrent_runs: 1`` is what keeps a second run away (docs/operations.md).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone

from medallion.errors import ConfigError
from medallion.storage import local_path

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 10.0
LEASE_SECONDS = 60.0


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


def _process_start(pid: int) -> str | None:
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


def lock_folder(checkpoints: str) -> str | None:
    """Where the stream locks of a lake whose checkpoints are under ``checkpoints`` live
    (``Config.checkpoints_folder``), or None where no lock can be taken."""
    local = local_path(checkpoints)
    return None if local is None else os.path.join(local, "_locks")


def _read(path: str) -> tuple[Holder | None, float | None]:
    """The holder in a lock file and the file's last heartbeat; (None, None) when it is gone."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        beat = os.stat(path).st_mtime
    except FileNotFoundError:
        return None, None
    try:
        data = json.loads(text)
        return Holder(**data), beat
    except (ValueError, TypeError):
        return Holder("?", -1, "?", "?", "unreadable"), beat


def _is_stale(holder: Holder, beat: float) -> bool:
    if holder.host == socket.gethostname() and holder.pid > 0:
        if not _pid_alive(holder.pid):
            return True
        now_start = _process_start(holder.pid)
        return bool(holder.process_start and now_start and now_start != holder.process_start)
    return time.time() - beat > LEASE_SECONDS


def _create_exclusively(path: str, content: str) -> bool:
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


class StreamLocks:
    """The locks of a set of streams, held together: :meth:`acquire`, then :meth:`release`."""

    def __init__(
        self, checkpoints: str, streams: Iterable[str], command: str, wait_seconds: float = 0.0
    ) -> None:
        self.checkpoints = checkpoints
        self.folder = lock_folder(checkpoints)
        self.wait_seconds = wait_seconds
        self.streams = tuple(dict.fromkeys(streams))
        pid = os.getpid()
        self.holder = Holder(
            host=socket.gethostname(),
            pid=pid,
            started_at=datetime.now(timezone.utc)
            .isoformat(timespec="seconds")
            .replace("+00:00", "Z"),
            command=command,
            run_id=uuid.uuid4().hex,
            process_start=_process_start(pid),
        )
        self._held: list[str] = []
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None

    def path(self, stream: str) -> str:
        assert self.folder is not None
        return os.path.join(self.folder, f"{stream}.lock")

    def acquire(self) -> StreamLocks:
        """Take every stream's lock, or none: raises :class:`LockHeld` naming the holder.
        Locks released may be taken again."""
        self._stop = threading.Event()
        if self.folder is None:
            log.debug("no stream locks on this storage; relying on one job run at a time")
            return self
        os.makedirs(self.folder, exist_ok=True)
        content = json.dumps(vars(self.holder))
        try:
            for stream in self.streams:
                self._take(stream, content)
        except BaseException:
            self.release()
            raise
        self._heartbeat = threading.Thread(
            target=self._beat, name="medallion-lock-heartbeat", daemon=True
        )
        self._heartbeat.start()
        return self

    def _take(self, stream: str, content: str) -> None:
        path = self.path(stream)
        deadline = time.monotonic() + self.wait_seconds
        for attempt in range(10_000):
            if _create_exclusively(path, content):
                self._held.append(path)
                return
            holder, beat = _read(path)
            if holder is None:
                continue  # released meanwhile: try again
            if not _is_stale(holder, beat or 0.0):
                if time.monotonic() < deadline:
                    time.sleep(min(0.05 * 2**attempt, 1.0))
                    continue
                raise LockHeld(
                    f"stream '{stream}' is already being written by another run: "
                    f"{holder.describe()}; lock {path}. Stop that run first, or wait for it "
                    f"to end. A lock left by a crash is taken over by itself (at once on the "
                    f"same host, after {LEASE_SECONDS:.0f} s without a heartbeat from another)."
                )
            # Move the stale lock aside, unless it changed since it was read (re-read just
            # before the rename: a lock another run took over meanwhile is left alone).
            if _read(path)[0] == holder:
                aside = f"{path}.stale-{uuid.uuid4().hex}"
                with contextlib.suppress(FileNotFoundError):
                    os.rename(path, aside)
                    os.remove(aside)
                    log.warning("took over the lock of '%s' from %s", stream, holder.describe())
        raise LockHeld(f"could not take the lock of stream '{stream}' ({path}): it keeps changing")

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            for path in list(self._held):
                with contextlib.suppress(OSError):
                    os.utime(path)

    def release(self) -> None:
        """Give up every lock still held (only those this object holds)."""
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join(timeout=5)
        for path in self._held:
            holder, _ = _read(path)
            if holder is not None and holder.run_id == self.holder.run_id:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)
        self._held.clear()


@contextlib.contextmanager
def stream_locks(
    checkpoints: str, streams: Iterable[str], command: str, wait_seconds: float = 0.0
) -> Iterator[StreamLocks]:
    """Hold the locks of ``streams`` for the block (see :class:`StreamLocks`); a lock held by
    a live run is waited for up to ``wait_seconds``, then refused."""
    locks = StreamLocks(checkpoints, streams, command, wait_seconds).acquire()
    try:
        yield locks
    finally:
        locks.release()


def lock_holders(checkpoints: str, streams: Iterable[str]) -> dict[str, Holder]:
    """The live holders of the given streams' locks (stale locks are left out)."""
    folder = lock_folder(checkpoints)
    if folder is None:
        return {}
    found = {}
    for stream in streams:
        holder, beat = _read(os.path.join(folder, f"{stream}.lock"))
        if holder is not None and not _is_stale(holder, beat or 0.0):
            found[stream] = holder
    return found
