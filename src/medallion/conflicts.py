"""Retry a Delta write that lost a race with a concurrent commit (OPTIMIZE, another writer),
and medallion's one retry loop (:func:`retry`).

Delta's optimistic concurrency fails a transaction when a concurrent commit removed files it
read (``DELTA_CONCURRENT_DELETE_READ``), for example a MERGE racing ``OPTIMIZE`` on the same
table. Nothing of the failed transaction is committed, so running it again against the new
snapshot is safe; writes inside ``foreachBatch`` are also tagged with their batch
(streams/exactly_once.py), so a retry can never apply a batch twice.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

from medallion.errors import is_failure

log = logging.getLogger(__name__)

T = TypeVar("T")


def is_concurrent_metadata_change(error: BaseException | None) -> bool:
    """True when a write failed because a concurrent commit changed metadata or protocol."""
    return is_failure(error, "metadata changed")


def is_write_conflict(error: BaseException) -> bool:
    """True when ``error`` is one of Delta's retryable concurrent-write conflicts."""
    return is_failure(error, "write conflict")


MAX_ATTEMPTS = 10
MAX_BACKOFF_SECONDS = 8.0


def retry_on_conflict(
    action: Callable[[], T], what: str, attempts: int = MAX_ATTEMPTS, backoff_seconds: float = 0.25
) -> T:
    """Run ``action``; when it fails with a write conflict, run it again (``attempts`` in all)."""
    why = "lost a race with a concurrent commit"
    return retry(action, what, is_write_conflict, attempts, backoff_seconds, why=why)


def retry(
    action: Callable[[], T],
    what: str,
    retry_if: Callable[[Exception], bool],
    attempts: int = MAX_ATTEMPTS,
    backoff_seconds: float = 0.25,
    max_backoff_seconds: float = MAX_BACKOFF_SECONDS,
    deadline: float | None = None,
    level: int = logging.WARNING,
    why: str = "failed",
) -> T:
    """Run ``action``; when it raises an error ``retry_if`` accepts, run it again, ``attempts``
    times in all and, with a ``deadline`` (``time.monotonic()``), not after it: medallion's one
    retry loop (write conflicts, a lock held by another run, tables created by a racing task);
    each retry is logged at ``level`` as ``<what> <why>``.

    The wait doubles after each failure (capped at ``max_backoff_seconds``) and is jittered, so
    two parties that keep colliding drift apart instead of colliding again.
    """
    for attempt in range(1, attempts + 1):
        try:
            return action()
        except Exception as error:
            late = deadline is not None and time.monotonic() >= deadline
            if attempt == attempts or late or not retry_if(error):
                raise
            delay = min(backoff_seconds * 2 ** (attempt - 1), max_backoff_seconds)
            delay *= 0.5 + random.random()
            log.log(
                level,
                "%s %s (attempt %d of %d); retrying in %.1fs",
                what,
                why,
                attempt,
                attempts,
                delay,
            )
            time.sleep(delay)
    raise AssertionError("unreachable")
