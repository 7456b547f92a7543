"""What medallion tells people on the console: one line per step, details behind ``-v``.

A step (a stream finished, a stop requested) is an INFO record of the module's own logger
marked as a step (:func:`step`). The CLI shows steps as plain lines on stderr, with warnings
and errors; stdout is kept for what a command prints as its result (a summary table, JSON).
``-v`` shows every record, timestamped. Without the CLI's configuration (a notebook, a library
call) logging is Python's default: steps are silent.
"""

from __future__ import annotations

import logging
import sys

DETAIL_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_STEP = "medallion_step"


class _Console(logging.Formatter):
    """Steps as they are; anything else with its time, level and logger."""

    def __init__(self) -> None:
        super().__init__(DETAIL_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        if getattr(record, _STEP, False):
            return record.getMessage()
        return super().format(record)


def _shown_quietly(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.WARNING or getattr(record, _STEP, False)


def configure(verbose: bool) -> None:
    """Steps, warnings and errors on stderr; with ``verbose``, every record too."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Console())
    if not verbose:
        handler.addFilter(_shown_quietly)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    logging.getLogger("py4j").setLevel(logging.WARNING)


def step(logger: logging.Logger, message: str, *args: object) -> None:
    """Tell people that a step happened, in one line (an INFO record of ``logger``)."""
    logger.info(message, *args, extra={_STEP: True})


def plural(count: int, noun: str) -> str:
    """``1 batch``, ``2 batches``, ``1,204 rows``."""
    suffix = "" if count == 1 else ("es" if noun.endswith(("s", "sh", "ch", "x")) else "s")
    return f"{count:,} {noun}{suffix}"
