"""A continuous run pauses its streams for a command that asks for them (``medallion erase``).

The command takes the pause-request lock of each pipeline it works on (medallion/locks.py),
then waits for the streams' locks. A ``--stream`` run that holds them sees the request within
half a second: it stops its queries after their batches in flight, gives up its locks, waits
until the request is released, takes its locks back and starts its queries again, which read
on from their checkpoints. A request left by a command that crashed goes stale as a lock does.
On storage without locks there are no requests either (medallion/locks.py).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from medallion.console import step
from medallion.locks import StreamLocks, lock_holders

log = logging.getLogger(__name__)

# How long a run waits to take its locks back after the command released them.
RESUME_WAIT_SECONDS = 60.0


def pause_request(pipeline: str) -> str:
    """The name of the lock that asks the streams of ``pipeline`` to pause."""
    return f"_pause_{pipeline}"


def pause_asked(checkpoints: str, requests: Iterable[str]) -> str | None:
    """The command that holds one of ``requests`` (live, not stale) in the lake whose
    checkpoints are under ``checkpoints``, or None."""
    holders = lock_holders(checkpoints, requests)
    return next(iter(holders.values())).command if holders else None


def paused_for(
    locks: StreamLocks, requests: list[str], command: str, stop: threading.Event
) -> bool:
    """With the run's queries stopped: give up ``locks`` until no command holds ``requests``,
    then take them back. False when ``stop`` was set meanwhile (the locks are not taken back)."""
    step(log, "pausing the streams: %s asked for them", command)
    locks.release()
    while pause_asked(locks.checkpoints, requests) is not None:
        if stop.wait(0.5):
            return False
    locks.wait_seconds = RESUME_WAIT_SECONDS
    locks.acquire()
    step(log, "resuming the streams")
    return True
