"""An available-now run's flows, each started once the flows that write what it reads have
finished (or earlier: early_start.py), until every one has finished."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from medallion.config import Config
from medallion.console import plural, step
from medallion.errors import PipelineError
from medallion.locks import check_lease
from medallion.session import is_connect_session
from medallion.streams import fusion
from medallion.streams.caught_up import has_read_everything
from medallion.streams.early_start import EarlyStarts
from medallion.streams.flows import Flow
from medallion.streams.flows import flow as _flow
from medallion.streams.query_lifecycle import MAX_RESTARTS, restartable, why_restart
from medallion.streams.sinks import Trigger, start_flow
from medallion.streams.stream_errors import describe_failure

log = logging.getLogger(__name__)


def start_query(
    spark: SparkSession,
    config: Config,
    flow: Flow,
    trigger: Trigger,
    fusions: dict[str, fusion.Fusion],
) -> StreamingQuery:
    """Start one flow (a head carrying the members its fusion names); a failure to start
    names the stream, its checkpoint and the cause."""
    try:
        fused = fusions[flow.name].fused if flow.fuses else ()
        return start_flow(spark, config, flow, trigger, fused)
    except PySparkException as error:
        raise describe_failure(flow, config, error) from error


def dependencies(
    flows: Sequence[Flow], fusions: dict[str, fusion.Fusion]
) -> dict[str, dict[str, set[str]]]:
    """For each flow, the flows of this run that write a table it reads (a head writes the
    tables of the members it carries too), with the keys it reads from each."""
    writer = {}
    for flow in flows:
        carried = fusions[flow.name].fused if flow.name in fusions else ()
        for name in (flow.name, *carried):
            writer.update(dict.fromkeys(_flow(name).writes, flow.name))
    reads_from: dict[str, dict[str, set[str]]] = {}
    for f in flows:
        reads_from[f.name] = {}
        for key in f.inputs:
            if writer.get(key, f.name) != f.name:
                reads_from[f.name].setdefault(writer[key], set()).add(key)
    return reads_from


def drain(
    spark: SparkSession,
    config: Config,
    flows: tuple[Flow, ...],
    fusions: dict[str, fusion.Fusion],
    interrupt: threading.Event | None = None,
) -> tuple[dict[str, list[StreamingQuery]], dict[str, float]]:
    """Run ``flows`` with available-now triggers, each as soon as the flows that write what it
    reads have finished (the events and the customer changes run side by side), or earlier,
    once a fused head has committed what it reads (early_start.py); each flow's queries, and
    its wall seconds. A failed flow stops the others."""
    for fused in fusions.values():
        if not fused.catching_up:
            fusion.mark_fused(spark, config, fused.head)
    trigger = Trigger(available_now=True)
    reads_from = dependencies(flows, fusions)
    waiting = list(flows)
    running: dict[str, tuple[Flow, StreamingQuery, float]] = {}
    finished: dict[str, list[StreamingQuery]] = {}
    runs: dict[str, list[StreamingQuery]] = {}
    skipped: set[str] = set()  # flows with nothing to read: never started
    seconds: dict[str, float] = {}
    restarts: dict[str, int] = {}
    # Over Spark Connect every foreachBatch shares the client's session, so the confs that tag
    # concurrent flows' MERGEs could tag each other's writes: run them one by one.
    one_at_a_time = is_connect_session(spark)
    early = None if one_at_a_time else EarlyStarts(spark, config, flows, reads_from)

    def pending(flow: Flow) -> set[str]:
        return set(reads_from[flow.name]) - finished.keys() - skipped

    try:
        while waiting or running:
            if interrupt is not None and interrupt.is_set():
                raise KeyboardInterrupt  # the queries stop below, their batches replayed later
            for name in running:  # a lost lock: the queries stop below (medallion/locks.py)
                check_lease(config.checkpoint(name))
            ready = [f for f in waiting if not pending(f)]
            if one_at_a_time:
                ready = ready[:1] if not running else []
            elif early is not None and not ready:
                ready = early.ready(waiting, {f.name: pending(f) for f in waiting})
            for flow in ready:
                waiting.remove(flow)
                if early is not None and early.ran_early(flow.name) and early.read_everything(flow):
                    finished[flow.name] = runs[flow.name]  # nothing committed since it ran
                    report_finished(flow.name, runs[flow.name], seconds[flow.name])
                    continue
                if has_read_everything(spark, config, flow):
                    step(log, f"{flow.name:<{STEP_NAME_WIDTH}}  OK  nothing new")
                    skipped.add(flow.name)
                    seconds[flow.name] = 0.0
                    continue
                if early is not None and pending(flow):
                    early.starting(flow)
                    log.info("starting %s early (%s, available now)", flow.name, flow.layer)
                else:
                    log.info("starting %s (%s, available now)", flow.name, flow.layer)
                query = start_query(spark, config, flow, trigger, fusions)
                running[flow.name] = (flow, query, time.monotonic())
            if not running:
                if ready:  # all of them had nothing to read: those after them may be ready
                    continue
                raise PipelineError(f"flows wait on each other: {[f.name for f in waiting]}")
            for name, (flow, query, started) in list(running.items()):
                try:
                    if not query.awaitTermination(0.05):
                        continue
                except PySparkException as error:
                    if restartable(error) and restarts.get(name, 0) < MAX_RESTARTS:
                        step(log, "%s: %s; restarting it", name, why_restart(error))
                        restarts[name] = restarts.get(name, 0) + 1
                        running[name] = (
                            flow,
                            start_query(spark, config, flow, trigger, fusions),
                            started,
                        )
                        continue
                    raise describe_failure(flow, config, error) from error
                del running[name]
                # The first run of a flow started early: it is done once its heads are.
                ran_early = early is not None and early.ran_early(name) and name not in runs
                runs.setdefault(name, []).append(query)
                seconds[name] = round(seconds.get(name, 0.0) + time.monotonic() - started, 3)
                if ran_early:
                    waiting.append(flow)
                    continue
                finished[name] = runs[name]
                report_finished(name, runs[name], seconds[name])
    finally:
        for _, query, _ in running.values():
            query.stop()
    return finished, seconds


# Wide enough for every declared flow's name, so the step lines of a run line up.
STEP_NAME_WIDTH = 30


def report_finished(name: str, queries: Sequence[StreamingQuery], seconds: float) -> None:
    """One line for people: ``bronze_events  OK  5,251 rows  1 batch  4.1 s``."""
    progress = [p for query in queries for p in query.recentProgress]
    rows = plural(sum(p.numInputRows for p in progress), "row")
    batches = plural(len(progress), "batch")
    step(log, f"{name:<{STEP_NAME_WIDTH}}  OK  {rows:>12}  {batches:>11}  {seconds:7.1f} s")
