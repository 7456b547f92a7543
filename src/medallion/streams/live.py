"""The live table of a ``--stream`` run on a terminal: one row per running stream.

Each row shows the batches the stream ran since the run started, its rows per second in and
out in its last batch, its backlog and when its last batch ended. The backlog is what the
stream's source has not handed it yet: Kafka's offsets between the stream's position and the
latest ones (from its progress), else what its checkpoint has not reached, read every few
seconds: the landed files not taken, or the versions of its Delta source not read.

:func:`stream_row` and :func:`backlog` are pure functions of Spark's progress reports;
:class:`LiveStreams` keeps them on screen with ``rich``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pyspark.sql.streaming import StreamingQuery
from rich.console import Console
from rich.live import Live
from rich.table import Table

from medallion import console
from medallion.console import plural
from medallion.streams.flows import Flow

COLUMNS = ("stream", "batches", "rows/s in", "rows/s out", "backlog", "last batch")
NUMERIC = ("batches", "rows/s in", "rows/s out")
# What a checkpoint has not reached is read at most this often.
CHECKPOINT_SECONDS = 5.0


@dataclass
class StreamRow:
    """What the live table shows of one stream."""

    stream: str
    first_batch: int | None = None
    last_batch: int | None = None
    rows_in_per_second: float | None = None
    rows_out_per_second: float | None = None
    backlog: str = "-"
    last_batch_at: str = "-"

    @property
    def batches(self) -> int:
        """Batches run since the run started."""
        if self.first_batch is None or self.last_batch is None:
            return 0
        return self.last_batch - self.first_batch + 1

    def cells(self) -> tuple[str, ...]:
        def rate(value: float | None) -> str:
            return "-" if value is None else f"{value:,.0f}"

        return (
            self.stream,
            f"{self.batches:,}",
            rate(self.rows_in_per_second),
            rate(self.rows_out_per_second),
            self.backlog,
            self.last_batch_at,
        )


def _offsets(value: Any) -> dict[str, dict[str, int]]:
    """Kafka's offsets of a progress report (``{"topic": {"0": 42}}``), given as JSON text."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def backlog(progress: Mapping[str, Any]) -> str | None:
    """What the sources of a progress report have not handed the stream yet, or None when
    they do not say: ``3 files`` (Delta) or ``120 offsets`` (Kafka).

    >>> backlog({"sources": [{"metrics": {"numFilesOutstanding": "3"}}]})
    '3 files'
    >>> backlog({"sources": [{"endOffset": '{"t": {"0": 10, "1": 5}}',
    ...                       "latestOffset": '{"t": {"0": 12, "1": 5}}'}]})
    '2 offsets'
    """
    files = offsets = None
    for source in progress.get("sources") or ():
        metrics = source.get("metrics") or {}
        if "numFilesOutstanding" in metrics:
            files = (files or 0) + int(metrics["numFilesOutstanding"])
        latest, end = _offsets(source.get("latestOffset")), _offsets(source.get("endOffset"))
        behind = [
            int(offset) - int(end.get(topic, {}).get(partition, offset))
            for topic, partitions in latest.items()
            if isinstance(partitions, dict)
            for partition, offset in partitions.items()
        ]
        if behind:
            offsets = (offsets or 0) + sum(max(0, n) for n in behind)
    if files is not None:
        return plural(files, "file")
    if offsets is not None:
        return plural(offsets, "offset")
    return None


def _executed(progress: Mapping[str, Any]) -> bool:
    """Whether a progress report is of a batch that ran (not an idle trigger)."""
    return "addBatch" in (progress.get("durationMs") or {})


def stream_row(row: StreamRow, progress: Mapping[str, Any] | None) -> StreamRow:
    """``row`` brought up to date with the stream's last progress report."""
    if not progress or not _executed(progress):
        return row
    batch = int(progress["batchId"])
    if row.first_batch is None:
        row.first_batch = batch
    row.last_batch = batch
    row.rows_in_per_second = progress.get("inputRowsPerSecond")
    row.rows_out_per_second = progress.get("processedRowsPerSecond")
    row.backlog = backlog(progress) or row.backlog
    started = datetime.fromisoformat(str(progress["timestamp"]).replace("Z", "+00:00"))
    seconds = (progress.get("durationMs") or {}).get("triggerExecution", 0) / 1000
    row.last_batch_at = f"{started:%H:%M:%S} ({seconds:.1f} s)"
    return row


def render(rows: Sequence[StreamRow]) -> Table:
    """The live table."""
    shown = console.table(*COLUMNS, numeric=NUMERIC)
    for row in rows:
        shown.add_row(*row.cells())
    return shown


class LiveStreams:
    """Keeps the live table on a terminal while a ``--stream`` run lasts.

    Pass :meth:`update` as ``run_streaming``'s ``watch``; log lines print above the table.
    ``checkpoint_backlog`` tells what a flow's checkpoint has not reached (``3 files``), or
    None when its progress is to tell (Kafka).
    """

    def __init__(
        self,
        checkpoint_backlog: Callable[[Flow], str | None],
        screen: Console | None = None,
        refresh_seconds: float = 1.0,
        checkpoint_seconds: float = CHECKPOINT_SECONDS,
    ) -> None:
        self.checkpoint_backlog = checkpoint_backlog
        self.rows: dict[str, StreamRow] = {}
        self.refresh_seconds = refresh_seconds
        self.checkpoint_seconds = checkpoint_seconds
        self._next_refresh = self._next_checkpoint_read = 0.0
        self._running: list[tuple[Flow, StreamingQuery]] = []
        self.live = Live(
            console.table(*COLUMNS),
            console=screen or console.console_for(sys.stderr),
            auto_refresh=False,
            redirect_stdout=False,
            redirect_stderr=False,
        )

    def __enter__(self) -> LiveStreams:
        self.live.start()
        console.use_live_console(self.live.console)
        return self

    def __exit__(self, *exc: object) -> None:
        console.use_live_console(None)
        # Stopped queries keep their last progress: the table ends with every batch counted.
        self._read(self._running, checkpoints=True)
        self.live.stop()

    def update(self, running: Sequence[tuple[Flow, StreamingQuery]]) -> None:
        """Read each query's last progress; redraw at most every ``refresh_seconds``."""
        self._running = list(running)
        now = time.monotonic()
        if now < self._next_refresh:
            return
        self._next_refresh = now + self.refresh_seconds
        read_checkpoints = now >= self._next_checkpoint_read
        if read_checkpoints:
            self._next_checkpoint_read = now + self.checkpoint_seconds
        self._read(self._running, read_checkpoints)

    def _read(self, running: Sequence[tuple[Flow, StreamingQuery]], checkpoints: bool) -> None:
        for flow, query in running:
            row = self.rows.setdefault(flow.name, StreamRow(flow.name))
            stream_row(row, query.lastProgress)
            if checkpoints:
                row.backlog = self.checkpoint_backlog(flow) or row.backlog
        self.live.update(render(list(self.rows.values())), refresh=True)
