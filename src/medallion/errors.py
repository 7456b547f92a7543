"""The errors a run reports to people (one line, naming what failed and the way out), and the
one place that tells Spark's and Delta's failures apart by what their text names."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType


class ConfigError(ValueError):
    """A configuration value is unusable; the message says which and why."""


class PipelineError(RuntimeError):
    """A stream failed or cannot start; the message names the stream, its checkpoint and the
    cause."""


def failure_text(error: BaseException | str) -> str:
    """All the text of a failure: its message, the JVM stack trace (with every ``Caused by``)
    and its causes. Spark's data-loss error is often a cause: the Delta write fails with
    ``TASK_WRITE_FAILED`` because the Kafka read under it did."""
    if isinstance(error, str):
        return error
    parts: list[str] = []
    seen: set[int] = set()
    current: object = error
    while isinstance(current, BaseException) and id(current) not in seen:
        seen.add(id(current))
        parts.append(str(current))
        for name in ("_stackTrace", "_stacktrace"):  # classic and Spark Connect errors
            trace = getattr(current, name, None)
            if isinstance(trace, str):
                parts.append(trace)
        current = getattr(current, "_cause", None) or current.__cause__ or current.__context__
    return "\n".join(parts)


# The kinds of failure the engine acts on, each by the error classes and exception names that
# Spark, Delta and the Kafka connector put in its text (error classes, since Spark 4, or the
# exception's class name for older code paths).
ERROR_MARKERS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        # Delta's retryable concurrent-write conflicts: nothing was committed, run it again
        # (medallion/conflicts.py). Metadata and protocol changes are not among them.
        "write conflict": (
            "DELTA_CONCURRENT_APPEND",
            "DELTA_CONCURRENT_DELETE_READ",
            "DELTA_CONCURRENT_DELETE_DELETE",
            "DELTA_CONCURRENT_TRANSACTION",
            "DELTA_CONCURRENT_WRITE",
            "ConcurrentAppendException",
            "ConcurrentDeleteReadException",
            "ConcurrentDeleteDeleteException",
            "ConcurrentTransactionException",
            "ConcurrentWriteException",
        ),
        # A concurrent commit changed a table's metadata (ALTER TABLE, a new column) or protocol
        # under a write: the query restarts and replays its batch, schema check included.
        "metadata changed": (
            "DELTA_METADATA_CHANGED",
            "DELTA_PROTOCOL_CHANGED",
            "MetadataChangedException",
            "ProtocolChangedException",
        ),
        # A Delta source's schema changed in a way a restart picks up (a column added
        # upstream); any other change repeats after a restart.
        "source schema changed": (
            "DELTA_SCHEMA_CHANGED_WITH_VERSION",
            "DELTA_SCHEMA_CHANGED_WITH_STARTING_OPTIONS",
            "DELTA_SCHEMA_CHANGED]",
        ),
        # A file a stream listed was gone when it read it.
        "file missing": ("FILE_NOT_EXIST", "FileNotFoundException"),
        # Kafka records a stream had not read are gone (the connector's KAFKA_DATA_LOSS).
        "kafka data loss": ("KAFKA_DATA_LOSS", "not available in Kafka any more"),
        # A batch cut short inside its foreachBatch by StreamingQuery.stop().
        "stopped mid-batch": (
            "java.lang.InterruptedException",
            "cancelled part of cancelled job group",
        ),
    }
)


def is_failure(error: BaseException | str | None, kind: str) -> bool:
    """True when ``error`` is a failure of ``kind`` (a key of :data:`ERROR_MARKERS`): its text
    (:func:`failure_text`, with the exception's type name) names one of the kind's markers.

    >>> is_failure("[DELTA_CONCURRENT_APPEND] Files were added ...", "write conflict")
    True
    >>> is_failure(RuntimeError("[DELTA_METADATA_CHANGED] ..."), "write conflict")
    False
    """
    if error is None:
        return False
    markers = ERROR_MARKERS[kind]
    text = error if isinstance(error, str) else f"{type(error).__name__}: {failure_text(error)}"
    return any(marker in text for marker in markers)
