"""One writer per stream: a lease file for each stream a run (or a reset) works on.

A run holds ``<checkpoints>/_locks/<stream>.lock`` for every stream it starts, for as long
as it runs, and ``medallion reset`` holds the locks of the streams it deletes. A second
writer is refused with the holder's host, pid and start time. The file is created atomically
(complete, or not at all: medallion/lock_files.py), and the holder touches it every
``HEARTBEAT_SECONDS``.

A lock left behind by a crash is taken over safely:

- on the same host, as soon as its pid is gone (or is another process now: the process's
  start time is part of the lock);
- from another host, once its heartbeat is older than ``LEASE_SECONDS``.

Of the runs that find the same stale lock, one takes it over, atomically
(medallion/lock_files.py says how).

A holder stops writing before its lease can lapse. Its heartbeat reads the lock before
touching it: once it holds another run, or is gone, or has not been renewed for
:func:`safe_seconds`, the lease is lost (:attr:`StreamLocks.lost`) and :meth:`StreamLocks.check`
(or :func:`check_lease`, by checkpoint) raises :class:`LeaseLost`. A continuous run checks twice
a second and stops its queries at once, an available-now run as it waits for them, and each
``foreachBatch`` function before its batch writes (streams/sinks.py). A lost lock is left as is.

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
from datetime import datetime, timezone

from medallion.conflicts import retry
from medallion.errors import PipelineError
from medallion.lock_files import (
    Holder,
    LockHeld,
    create_or_take_over,
    is_stale,
    process_start,
    read_lock,
    remove_old_claims,
)
from medallion.storage import local_path

log = logging.getLogger(__name__)


class _Held(Exception):
    """Another run holds a lock (``holder``): what a try at taking it raises."""

    def __init__(self, holder: Holder) -> None:
        super().__init__(holder.describe())
        self.holder = holder


# Read when used, so that tests can shorten them.
HEARTBEAT_SECONDS = 10.0
LEASE_SECONDS = 60.0


def safe_seconds() -> float:
    """How long a holder may go without renewing its lease before it stops writing: two
    heartbeats short of the lease, after which another host may take its streams."""
    return LEASE_SECONDS - 2 * HEARTBEAT_SECONDS


class LeaseLost(PipelineError):
    """This run no longer holds a stream's lock for sure: it must not write the stream."""


def lock_folder(checkpoints: str) -> str | None:
    """Where the stream locks of a lake whose checkpoints are under ``checkpoints`` live
    (``Config.checkpoints_folder``), or None where no lock can be taken."""
    local = local_path(checkpoints)
    return None if local is None else os.path.join(local, "_locks")


# The locks this process holds, by lock file: what check_lease looks up.
_HOLDING: dict[str, StreamLocks] = {}


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
            process_start=process_start(pid),
        )
        # Each lock held, with when it was last renewed (taken, or touched: monotonic).
        self._renewed: dict[str, float] = {}
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None
        self.lost = threading.Event()  # set once the lease is lost: write no more
        self._why_lost = ""

    def path(self, stream: str) -> str:
        assert self.folder is not None
        return os.path.join(self.folder, f"{stream}.lock")

    def acquire(self) -> StreamLocks:
        """Take every stream's lock, or none: raises :class:`LockHeld` naming the holder.
        Locks released may be taken again."""
        self._stop, self.lost, self._renewed = threading.Event(), threading.Event(), {}
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

        def take() -> None:
            taken = time.monotonic()
            holder = create_or_take_over(path, content, LEASE_SECONDS)
            if holder is not None:
                raise _Held(holder)
            self._renewed[path] = taken

        try:
            retry(
                take,
                f"taking the lock of stream '{stream}'",
                lambda error: isinstance(error, _Held),
                attempts=10_000,
                backoff_seconds=0.05,
                max_backoff_seconds=1.0,
                deadline=time.monotonic() + self.wait_seconds,
                level=logging.DEBUG,
            )
        except _Held as held:
            raise LockHeld(
                f"stream '{stream}' is already being written by another run: "
                f"{held.holder.describe()}; lock {path}. Stop that run first, or wait for it "
                f"to end. A lock left by a crash is taken over by itself (at once on the "
                f"same host, after {LEASE_SECONDS:.0f} s without a heartbeat from another)."
            ) from None
        _HOLDING[os.path.normpath(path)] = self
        remove_old_claims(path, LEASE_SECONDS)

    def _beat(self) -> None:
        stop, renewed = self._stop, self._renewed  # this holding's, even once released
        while not stop.wait(HEARTBEAT_SECONDS) and not self.lost.is_set():
            for path in list(renewed):
                if not self._renew(path, renewed):
                    break

    def _renew(self, path: str, renewed: dict[str, float]) -> bool:
        """Touch a lock once sure it is still this run's; False once the lease is lost: the
        lock is another run's or gone, or was not renewed for :func:`safe_seconds`."""
        started = time.monotonic()
        try:
            holder, _ = read_lock(path)
            if holder is None or holder.run_id != self.holder.run_id:
                self._lose(path, "removed" if holder is None else f"taken by {holder.describe()}")
                return False
            os.utime(path)
        except OSError as error:
            silent = time.monotonic() - renewed[path]
            if silent > safe_seconds():
                self._lose(path, f"not renewed for {silent:.0f} s ({error})")
                return False
            log.warning("could not renew the lock %s (%s); trying again", path, error)
            return True
        renewed[path] = started
        return True

    def _lose(self, path: str, why: str) -> None:
        if not self.lost.is_set():
            self._why_lost = f"its lock {path} was {why}"
            log.error("lost the lease of %s: %s", os.path.basename(path), why)
            self.lost.set()

    def check(self) -> None:
        """Raise :class:`LeaseLost` once this run may no longer write its streams: a lock was
        taken over or removed, or not renewed for :func:`safe_seconds` (its heartbeat failed,
        or hangs)."""
        if self._heartbeat is not None and self._renewed:
            path, renewed = min(self._renewed.items(), key=lambda item: item[1])
            if (silent := time.monotonic() - renewed) > safe_seconds():
                self._lose(path, f"not renewed for {silent:.0f} s")
        if self.lost.is_set():
            streams = ", ".join(f"'{s}'" for s in self.streams)
            raise LeaseLost(
                f"{self.holder.command} stopped writing {streams}: {self._why_lost}, so another "
                f"run may write them now (a lease lapses after {LEASE_SECONDS:.0f} s without a "
                f"heartbeat). Check that no other run writes them, then run again."
            )

    def release(self) -> None:
        """Give up every lock still held: those still this run's, renewed within
        :func:`safe_seconds` (a lock whose lease may have lapsed may be another run's by now,
        whatever it holds when read)."""
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join(timeout=5)
        self._heartbeat = None
        now = time.monotonic()
        for path, renewed in self._renewed.items():
            if _HOLDING.get(os.path.normpath(path)) is self:
                del _HOLDING[os.path.normpath(path)]
            try:
                holder, _ = read_lock(path)
            except OSError:  # unreadable: not this run's to remove
                continue
            if holder is None or holder.run_id != self.holder.run_id:
                continue
            if now - renewed < safe_seconds():
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)
            else:
                log.warning("left the lock %s: its lease may have lapsed", path)
        self._renewed = {}


def check_lease(checkpoint: str) -> None:
    """Raise :class:`LeaseLost` when this process holds the lock of the stream whose checkpoint
    is ``checkpoint`` (``Config.checkpoint``) and has lost its lease; pass for a stream whose
    lock it does not hold (no lock on this storage, or a Spark Connect server's worker)."""
    checkpoint = checkpoint.rstrip("/")
    folder = lock_folder(os.path.dirname(checkpoint))
    if folder is None:
        return
    locks = _HOLDING.get(
        os.path.normpath(os.path.join(folder, f"{os.path.basename(checkpoint)}.lock"))
    )
    if locks is not None:
        locks.check()


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
        holder, beat = read_lock(os.path.join(folder, f"{stream}.lock"))
        if holder is not None and not is_stale(holder, beat, LEASE_SECONDS):
            found[stream] = holder
    return found
