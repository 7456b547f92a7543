"""A running query's lifecycle: which failures a restart cures, and stopping after the batch in
flight."""

from __future__ import annotations

import threading
import time

from pyspark.sql.streaming import StreamingQuery

from medallion.conflicts import is_concurrent_metadata_change
from medallion.streams.table_schema import is_restartable_schema_change

# How often one query may be restarted after a restartable failure, in one run.
MAX_RESTARTS = 5


def restartable(error: BaseException | None) -> bool:
    """A failure a restart cures: the batch is replayed from the checkpoint, exactly once.

    - its Delta source gained a column (opt-in schema evolution upstream): a restart reads the
      new schema from where the checkpoint stands;
    - a concurrent commit changed a table's metadata or protocol under a write (an
      ``ALTER TABLE ... SET TBLPROPERTIES`` during the run).
    """
    return is_restartable_schema_change(error) or is_concurrent_metadata_change(error)


def why_restart(error: BaseException | None) -> str:
    """Why :func:`restartable` said yes, for the run's console line."""
    if is_restartable_schema_change(error):
        return "its source's schema changed"
    return "a concurrent commit changed a table's metadata under its write"


def _progress_stamp(query: StreamingQuery) -> str | None:
    """The timestamp of the query's last reported trigger (None before the first)."""
    progress = query.lastProgress
    return progress.get("timestamp") if progress else None


def stop_after_batch(query: StreamingQuery, deadline: float) -> None:
    """Stop a query once its in-flight batch has completed (or at ``deadline``, monotonic).

    With a backlog a query starts its next batch right after the last, so it is rarely seen
    idle: the batch in flight has completed when the query is idle or has reported a newer
    progress than when the stop began. A batch cut short by the deadline (or the next batch,
    started a moment before ``stop``) is safe too: it is replayed from the checkpoint.
    """
    in_flight_since = _progress_stamp(query)
    while query.isActive and time.monotonic() < deadline:
        if not query.status.get("isTriggerActive") or _progress_stamp(query) != in_flight_since:
            break
        time.sleep(0.05)
    query.stop()


def stop_all_after_batches(queries: list[StreamingQuery], deadline: float) -> None:
    """Stop every query after its in-flight batch, all at once: a stop takes as long as the
    longest batch in flight, not the sum of them (the streams are independent: each resumes
    from its own checkpoint)."""
    stoppers = [
        threading.Thread(target=stop_after_batch, args=(q, deadline), name=f"stop-{q.name}")
        for q in queries
        if q.isActive
    ]
    for stopper in stoppers:
        stopper.start()
    for stopper in stoppers:
        stopper.join()
