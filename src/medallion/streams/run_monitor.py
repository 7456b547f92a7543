"""A run's live progress: records the streams' progress events to the lake for the length of
a run (streams/progress.py), and shows them while ``medallion run`` works: on a terminal one
status line redrawn in place every second; otherwise (CI, output redirected) one log line at
most every ``log_seconds``, and only when something changed. :func:`monitored` wraps the
runner's functions to do all of that around a run.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO, TypeVar

from pyspark.sql import SparkSession

from medallion.config import Config
from medallion.erasure_log import record_dropped
from medallion.session import is_connect_session
from medallion.streams.progress import (
    ProgressRecorder,
    StreamTotals,
    wait_for_listener_bus,
    write_progress,
)

log = logging.getLogger(__name__)


LAYER_OF_STREAM: Callable[[str], str] = lambda name: name.split("_", 1)[0]  # noqa: E731


def render_progress(totals: dict[str, StreamTotals], elapsed: float) -> str:
    """``bronze 1200 rows/3 batches | silver ... | 42s``: rows and batches per layer."""
    layers: dict[str, list[int]] = {}
    for name, t in totals.items():
        entry = layers.setdefault(LAYER_OF_STREAM(name), [0, 0])
        entry[0] += t.rows
        entry[1] += t.batches
    order = {"bronze": 0, "silver": 1, "gold": 2}
    parts = [
        f"{layer} {rows} rows/{batches} batches"
        for layer, (rows, batches) in sorted(layers.items(), key=lambda kv: order.get(kv[0], 9))
    ]
    return (
        " | ".join([*parts, f"{elapsed:.0f}s"])
        if parts
        else f"waiting for batches | {elapsed:.0f}s"
    )


def _is_terminal(stream: TextIO) -> bool:
    if os.environ.get("CI") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class _ClearStatusLine(logging.Filter):
    """Erases the live status line before a log record is written over it."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self.stream = stream

    def filter(self, record: logging.LogRecord) -> bool:
        with contextlib.suppress(ValueError):  # the stream was closed
            self.stream.write("\r\x1b[K")
        return True


@dataclass
class RunMonitor:
    """Records progress events to the lake and shows live progress for the length of a run."""

    spark: SparkSession
    config: Config
    flush_seconds: float = 30.0
    log_seconds: float = 30.0
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    live: bool | None = None
    recorder: ProgressRecorder = field(default_factory=ProgressRecorder)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._registered = False
        self._started = time.monotonic()
        self._filter: _ClearStatusLine | None = None
        self._last_line = ""
        self.written = 0

    def start(self) -> RunMonitor:
        """Register the listener and start the flush and display threads."""
        if is_connect_session(self.spark):
            log.info("stream progress is not recorded over Spark Connect (no local listener)")
            return self
        self.spark.streams.addListener(self.recorder)
        self._registered = True
        terminal = _is_terminal(self.stream) if self.live is None else self.live
        if terminal:
            self._filter = _ClearStatusLine(self.stream)
            for handler in logging.getLogger().handlers:
                handler.addFilter(self._filter)
        for target, name in ((self._flush_loop, "flush"), (self._display_loop, "display")):
            args = (terminal,) if name == "display" else ()
            thread = threading.Thread(
                target=target, args=args, name=f"medallion-{name}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return self

    def close(self) -> None:
        """Deliver the last events, write everything buffered, stop the threads."""
        if not self._registered:
            return
        wait_for_listener_bus(self.spark)
        self._stop.set()
        self.recorder.ended.set()  # wakes the flush thread
        for thread in self._threads:
            thread.join(timeout=60)
        self.flush()
        try:
            self.spark.streams.removeListener(self.recorder)
        except Exception:  # noqa: BLE001 - the session may be stopping
            log.debug("could not remove the progress listener", exc_info=True)
        if self._filter is not None:
            for handler in logging.getLogger().handlers:
                handler.removeFilter(self._filter)
            self.stream.write("\r\x1b[K")
            self.stream.flush()
        self._registered = False

    def flush(self) -> None:
        """Write the buffered events now; on failure keep them for the next attempt."""
        rows = self.recorder.take()
        if not rows:
            return
        try:
            write_progress(self.spark, self.config, rows)
            self.written += len(rows)
        except Exception:  # noqa: BLE001 - monitoring never stops the pipeline
            log.warning("could not record %d progress events yet", len(rows), exc_info=True)
            self.recorder.give_back(rows)
            return
        try:
            record_dropped(self.spark, self.config, rows)  # erased subjects' lines, if any
        except Exception:  # noqa: BLE001 - monitoring never stops the pipeline
            log.warning("could not log the lines of erased subjects dropped", exc_info=True)

    def _flush_loop(self) -> None:
        """Flush every ``flush_seconds``, and as soon as no query of the run is running: an
        available-now run's last events are written while the run summarizes, not after it."""
        while not self._stop.is_set():
            self.recorder.ended.wait(self.flush_seconds)
            self.recorder.ended.clear()
            if not self._stop.is_set():
                self.flush()

    def _display_loop(self, terminal: bool) -> None:
        interval = 1.0 if terminal else self.log_seconds
        while not self._stop.wait(interval):
            line = render_progress(self.recorder.snapshot(), time.monotonic() - self._started)
            if terminal:
                self.stream.write(f"\r\x1b[K{line}")
                self.stream.flush()
            else:
                counts = line.rsplit(" | ", 1)[0]
                if counts != self._last_line:  # only when something changed
                    self._last_line = counts
                    log.info("progress: %s", line)


F = TypeVar("F", bound=Callable[..., Any])


def monitored(run: F) -> F:
    """Wrap a runner function ``run(spark, config, ...)`` in a :class:`RunMonitor`."""

    @functools.wraps(run)
    def wrapper(spark: SparkSession, config: Config, *args: Any, **kwargs: Any) -> Any:
        monitor = RunMonitor(spark, config).start()
        try:
            return run(spark, config, *args, **kwargs)
        finally:
            monitor.close()

    return wrapper  # type: ignore[return-value]
