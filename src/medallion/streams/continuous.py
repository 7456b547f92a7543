"""The queries of a continuous run: started together, restarted after a failure a restart
cures, paused for a command that asks for their streams (streams/pausing.py), and stopped
together after their batches in flight."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from medallion.compaction import BackgroundCompactor
from medallion.config import Config
from medallion.console import step
from medallion.deployment import pipelines_of
from medallion.locks import StreamLocks
from medallion.sql_names import TableRef
from medallion.streams.flows import Flow
from medallion.streams.pausing import pause_asked, pause_request, paused_for
from medallion.streams.query_lifecycle import (
    MAX_RESTARTS,
    restartable,
    stop_all_after_batches,
    why_restart,
)
from medallion.streams.sinks import Trigger

log = logging.getLogger(__name__)

Starter = Callable[[Flow, Trigger], StreamingQuery]


def streaming_trigger(interval_seconds: float, flow: Flow) -> Trigger:
    """The processing-time trigger of a flow: the run's ``interval_seconds``
    (``Config.trigger_interval_seconds``), or the flow's minimum."""
    interval = max(interval_seconds, flow.min_interval_seconds)
    return Trigger(available_now=False, interval_seconds=interval)


class ContinuousQueries:
    """One query per flow, with a compactor of ``written`` beside them."""

    def __init__(
        self,
        spark: SparkSession,
        config: Config,
        flows: Sequence[Flow],
        written: Sequence[TableRef],
        start: Starter,
        locks: StreamLocks,
    ) -> None:
        self.spark, self.config, self.flows = spark, config, tuple(flows)
        self._written, self._start, self._locks = written, start, locks
        names = {f.name for f in self.flows}
        self._requests = [
            pause_request(p.name) for p in pipelines_of(config) if names & {f.name for f in p.flows}
        ]
        self.running: list[tuple[Flow, StreamingQuery]] = []
        self._paused: list[tuple[Flow, StreamingQuery]] = []  # stopped for a pause
        self._compactor: BackgroundCompactor | None = None
        self._restarts = 0

    def start(self) -> None:
        self._compactor = BackgroundCompactor(
            self.spark, self._written, self.config.compaction_check_seconds
        )
        self._compactor.start()
        self.running = []
        for flow in self.flows:
            trigger = streaming_trigger(self.config.trigger_interval_seconds, flow)
            step(log, "starting %s (every %ss)", flow.name, trigger.interval_seconds)
            self.running.append((flow, self._start(flow, trigger)))

    def stop(self, at_once: bool = False) -> None:
        """Every query after its batch in flight, at most ``stop_timeout_seconds`` in all;
        ``at_once``: its batch in flight cut short too (replayed from the checkpoint)."""
        timeout = 0.0 if at_once else self.config.stop_timeout_seconds
        deadline = time.monotonic() + timeout
        stop_all_after_batches([query for _, query in self.running], deadline)
        if self._compactor is not None:
            self._compactor.finish(timeout=max(0.0, deadline - time.monotonic()))

    def pause_if_asked(self, stop: threading.Event) -> bool:
        """Stop, wait out and start again for a command that asks for the streams (an
        erasure); False when ``stop`` was set while paused."""
        command = pause_asked(self.config.checkpoints_folder, self._requests)
        if command is None:
            return True
        self.stop()
        self._paused.extend(self.running)
        self.running = []
        if not paused_for(self._locks, self._requests, command, stop):
            return False
        self.start()
        return True

    def by_name(self) -> dict[str, list[StreamingQuery]]:
        """Every query the run started, by flow (for its report)."""
        started: dict[str, list[StreamingQuery]] = {}
        for flow, query in [*self._paused, *self.running]:
            started.setdefault(flow.name, []).append(query)
        return started

    def restart_failed(self, describe_failure: Callable[[Flow, BaseException], Exception]) -> None:
        """Restart a query that failed in a way a restart cures; raise for any other failure."""
        for position, (flow, query) in enumerate(self.running):
            if query.isActive:
                continue
            error = query.exception()
            if restartable(error) and self._restarts < MAX_RESTARTS * len(self.running):
                step(log, "%s: %s; restarting it", flow.name, why_restart(error))
                self._restarts += 1
                trigger = streaming_trigger(self.config.trigger_interval_seconds, flow)
                self.running[position] = (flow, self._start(flow, trigger))
                continue
            raise describe_failure(flow, error or RuntimeError("stopped unexpectedly"))
