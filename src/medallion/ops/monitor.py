"""Stream monitoring: every query progress event into ``<lake>/_system/stream_progress``, and
live progress while ``medallion run`` works.

A :class:`ProgressRecorder` (a ``StreamingQueryListener``) only buffers: Spark calls it on its
listener-bus thread, and running a Delta write there could block the bus every stream reports
to. The buffer is written to the Delta table by a background thread every
``flush_seconds`` and once more when the run ends, after the listener bus has delivered every
event (so the last batches of a run are never lost). :func:`monitored` wraps the runner's
functions to do all of that around a run.

The same events drive the live progress of ``medallion run``: on a terminal one status line
redrawn in place every second; otherwise (CI, output redirected) one log line at most every
``log_seconds``, and only when something changed.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, TextIO, TypeVar

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener

from medallion.config import Config, TableRef
from medallion.session import is_connect_session
from medallion.tables import append_rows, create_delta_table, read_table, table_exists

log = logging.getLogger(__name__)

PROGRESS_TABLE_KEY = "_system/stream_progress"

PROGRESS_SCHEMA = (
    "query_name STRING, query_id STRING, run_id STRING, batch_id BIGINT, timestamp TIMESTAMP, "
    "num_input_rows BIGINT, input_rows_per_second DOUBLE, processed_rows_per_second DOUBLE, "
    "duration_ms MAP<STRING, BIGINT>, "
    "sources ARRAY<STRUCT<description: STRING, start_offset: STRING, end_offset: STRING, "
    "latest_offset: STRING, num_input_rows: BIGINT, input_rows_per_second: DOUBLE, "
    "processed_rows_per_second: DOUBLE>>, "
    "sink_description STRING, sink_num_output_rows BIGINT, progress_json STRING"
)
PROGRESS_PROPERTIES = {
    "delta.appendOnly": "true",
    "delta.autoOptimize.optimizeWrite": "true",
    "delta.autoOptimize.autoCompact": "true",
    "delta.checkpointInterval": "100",
}


def progress_table(config: Config) -> TableRef:
    """Where the progress events of a lake are kept: ``<lake>/_system/stream_progress``."""
    return config.system_table("stream_progress")


def create_progress_table(spark: SparkSession, config: Config) -> TableRef:
    """Create the progress table if it is missing; return it."""
    table = progress_table(config)
    create_delta_table(spark, table, PROGRESS_SCHEMA, PROGRESS_PROPERTIES)
    return table


def _timestamp(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


def _rate(value: Any) -> float | None:
    return None if value is None else float(value)


def progress_row(progress: Any) -> dict[str, Any]:
    """One row of the progress table from a ``StreamingQueryProgress``."""
    sink = getattr(progress, "sink", None)
    return {
        "query_name": progress.name,
        "query_id": str(progress.id),
        "run_id": str(progress.runId),
        "batch_id": int(progress.batchId),
        "timestamp": _timestamp(progress.timestamp),
        "num_input_rows": int(progress.numInputRows),
        "input_rows_per_second": _rate(progress.inputRowsPerSecond),
        "processed_rows_per_second": _rate(progress.processedRowsPerSecond),
        "duration_ms": {k: int(v) for k, v in (progress.durationMs or {}).items()},
        "sources": [
            {
                "description": s.description,
                "start_offset": s.startOffset,
                "end_offset": s.endOffset,
                "latest_offset": s.latestOffset,
                "num_input_rows": int(s.numInputRows),
                "input_rows_per_second": _rate(s.inputRowsPerSecond),
                "processed_rows_per_second": _rate(s.processedRowsPerSecond),
            }
            for s in progress.sources or []
        ],
        "sink_description": sink.description if sink is not None else None,
        "sink_num_output_rows": int(sink.numOutputRows) if sink is not None else None,
        "progress_json": progress.json,
    }


@dataclass
class StreamTotals:
    """What one stream did during a run, from its progress events."""

    rows: int = 0
    batches: int = 0
    last_rows_per_second: float | None = None


class ProgressRecorder(StreamingQueryListener):
    """Buffers the progress events of the queries started while it is registered.

    Callbacks only take a lock and append: no Spark call ever runs on the listener bus.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[dict[str, Any]] = []
        self._queries: set[str] = set()
        self.totals: dict[str, StreamTotals] = {}
        self.events = 0

    def onQueryStarted(self, event: Any) -> None:
        with self._lock:
            self._queries.add(str(event.id))

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        if str(progress.id) not in self._queries:
            return  # a query of someone else's run in the same session
        row = progress_row(progress)
        with self._lock:
            self._pending.append(row)
            self.events += 1
            totals = self.totals.setdefault(row["query_name"] or row["query_id"], StreamTotals())
            if "addBatch" in row["duration_ms"]:  # an executed batch, not an idle heartbeat
                totals.batches += 1
                totals.rows += row["num_input_rows"]
                totals.last_rows_per_second = row["processed_rows_per_second"]

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass

    def take(self) -> list[dict[str, Any]]:
        """The buffered rows, removed from the buffer."""
        with self._lock:
            rows, self._pending = self._pending, []
        return rows

    def give_back(self, rows: list[dict[str, Any]]) -> None:
        """Put rows that could not be written back in front of the buffer."""
        with self._lock:
            self._pending = rows + self._pending

    def snapshot(self) -> dict[str, StreamTotals]:
        """A copy of the per-stream totals."""
        with self._lock:
            return {k: StreamTotals(**vars(v)) for k, v in self.totals.items()}


def write_progress(spark: SparkSession, config: Config, rows: list[dict[str, Any]]) -> None:
    """Append progress rows to the progress table (created when missing)."""
    if not rows:
        return
    append_rows(spark, create_progress_table(spark, config), rows, PROGRESS_SCHEMA)


def wait_for_listener_bus(spark: SparkSession, timeout_seconds: float = 30.0) -> None:
    """Wait until Spark has delivered every posted listener event (classic sessions only)."""
    try:
        bus = spark.sparkContext._jsc.sc().listenerBus()  # type: ignore[union-attr]
        bus.waitUntilEmpty(int(timeout_seconds * 1000))
    except Exception:  # noqa: BLE001 - Spark Connect, or a bus that would not drain in time
        log.debug("could not wait for the listener bus", exc_info=True)
        time.sleep(1.0)


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

    def _flush_loop(self) -> None:
        while not self._stop.wait(self.flush_seconds):
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


def read_progress(spark: SparkSession, config: Config):
    """The progress table as a DataFrame, or None when nothing was recorded yet."""
    table = progress_table(config)
    return read_table(spark, table) if table_exists(spark, table) else None


def parse_progress_json(text: str) -> dict[str, Any]:
    """The full progress event of one row (``progress_json``) as a dict."""
    return json.loads(text)
