"""Stream metrics: every query progress event, into ``<lake>/_system/stream_progress``.

A :class:`ProgressRecorder` (a ``StreamingQueryListener``) only buffers: Spark calls it on its
listener-bus thread, and running a Delta write there could block the bus every stream reports
to. streams/run_monitor.py writes the buffer to the Delta table from a background thread, and
once more when the run ends, after the listener bus has delivered every event (so the last
batches of a run are never lost).

Each event crosses from the JVM as its JSON text, in one Py4J call (:class:`_JsonEvents`):
PySpark's own bridge reads every field of the progress through Py4J, ending each map with a
Java exception it converts, about 40 calls an event on the Python thread that a stream's
``foreachBatch`` needs too (docs/development.md, "Where a local run's time goes").
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from pyspark import SparkContext
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.streaming.listener import QueryProgressEvent

from medallion.config import Config
from medallion.sql_names import TableRef
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


def lake_table(config: Config, key: str) -> TableRef:
    """The table of ``key``: a declared table, or one of medallion's own (``_system/<name>``,
    such as ``_system/stream_progress``)."""
    layer, _, name = key.partition("/")
    return config.system_table(name) if layer == "_system" else config.table(key)


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


class _JsonEvents:
    """The Java side of a :class:`ProgressRecorder`: Spark's ``PythonStreamingQueryListener``,
    handing each progress over as its JSON text (one Py4J call); of the other events, only a
    query's start and end."""

    def __init__(self, recorder: ProgressRecorder) -> None:
        self.recorder = recorder

    def onQueryStarted(self, jevent: Any) -> None:
        self.recorder.started(jevent.id().toString())

    def onQueryProgress(self, jevent: Any) -> None:
        event = QueryProgressEvent.fromJson({"progress": json.loads(jevent.progress().json())})
        self.recorder.onQueryProgress(event)

    def onQueryIdle(self, jevent: Any) -> None:
        pass

    def onQueryTerminated(self, jevent: Any) -> None:
        self.recorder.terminated(jevent.id().toString())

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


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
        self._running: set[str] = set()
        self.ended = threading.Event()  # set when the run's last running query has ended

    @property
    def _jlistener(self) -> Any:
        """What ``spark.streams.addListener`` registers in the JVM (PySpark's hook): the JSON
        bridge instead of PySpark's field-by-field one."""
        if not hasattr(self, "_jlistenerobj"):
            jvm = SparkContext._jvm
            streaming = jvm.org.apache.spark.sql.streaming  # type: ignore[union-attr]
            self._jlistenerobj = streaming.PythonStreamingQueryListenerWrapper(_JsonEvents(self))
        return self._jlistenerobj

    def started(self, query_id: str) -> None:
        """Record a query of this run: only their progress is kept."""
        with self._lock:
            self._queries.add(query_id)
            self._running.add(query_id)

    def onQueryStarted(self, event: Any) -> None:
        self.started(str(event.id))

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
        self.terminated(str(event.id))

    def terminated(self, query_id: str) -> None:
        """A query ended: once none of this run's is running, their last progress is in."""
        with self._lock:
            if query_id not in self._running:
                return
            self._running.discard(query_id)
            idle = not self._running
        if idle:
            self.ended.set()

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


def read_progress(spark: SparkSession, config: Config):
    """The progress table as a DataFrame, or None when nothing was recorded yet."""
    table = progress_table(config)
    return read_table(spark, table) if table_exists(spark, table) else None


def parse_progress_json(text: str) -> dict[str, Any]:
    """The full progress event of one row (``progress_json``) as a dict."""
    return json.loads(text)
