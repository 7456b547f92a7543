"""The errors a run reports to people: one line, naming what failed and the way out."""

from __future__ import annotations


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
