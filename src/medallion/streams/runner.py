"""Run the flows: layer by layer with available-now triggers, or all at once until stopped."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence

from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from medallion.compaction import compact_fragmented
from medallion.config import Config
from medallion.declarations import landing_datasets
from medallion.errors import PipelineError
from medallion.gaps import gaps_table_spec
from medallion.locks import StreamLocks, stream_locks
from medallion.quality_log import quality_table
from medallion.session import is_connect_session
from medallion.sql_names import TableRef
from medallion.storage import folder_exists
from medallion.streams import fusion
from medallion.streams.continuous import ContinuousQueries
from medallion.streams.drain import drain, start_query
from medallion.streams.flows import Flow, fusion_head
from medallion.streams.progress import PROGRESS_PROPERTIES, PROGRESS_SCHEMA, progress_table
from medallion.streams.run_choice import chosen_flows, nothing_to_run
from medallion.streams.run_monitor import monitored
from medallion.streams.run_report import RunReport, summarize, table_versions
from medallion.streams.stage_clock import STAGE_CLOCK
from medallion.streams.start_checks import check_landing, record_gaps, refuse_unsafe_starts
from medallion.streams.stream_errors import describe_failure, error_summary
from medallion.tables import (
    ensure_tables,
    table_version,
)

log = logging.getLogger(__name__)

# How often a streaming run checks that no landing file it read was replaced since, and
# records input lost before it was read.
LANDING_CHECK_SECONDS = 30.0


def _written_tables(config: Config, flows: Sequence[Flow]) -> list[TableRef]:
    """The tables the flows write, and the progress and data-quality logs the run appends to."""
    keys = dict.fromkeys(key for flow in flows for key in flow.writes)
    return [*(config.table(key) for key in keys), progress_table(config), quality_table(config)]


def _prepare(
    spark: SparkSession, config: Config, flows: Sequence[Flow], register_names: bool
) -> None:
    progress = (progress_table(config), PROGRESS_SCHEMA, PROGRESS_PROPERTIES)
    ensure_tables(spark, config, [progress, gaps_table_spec(config)], register_names)
    for dataset in landing_datasets(flows) if config.source == "files" else ():
        path = config.landing_dir(dataset)
        if "://" not in path and not path.startswith("/Volumes/"):
            os.makedirs(path, exist_ok=True)


def _with_members(flows: Sequence[Flow]) -> list[str]:
    """The names of ``flows`` and of the flows their heads carry."""
    names = [name for f in flows for name in (f.name, *f.fuses)]
    return list(dict.fromkeys(names))


def _locks(config: Config, flows: tuple[Flow, ...], how: str):
    """The locks of the flows' streams (and of the flows fused into them), held for a whole
    run (medallion/locks.py)."""
    return stream_locks(config.checkpoints_folder, _with_members(flows), f"medallion run ({how})")


def _runnable(
    spark: SparkSession, config: Config, flows: Sequence[Flow], fusions: dict[str, fusion.Fusion]
) -> tuple[Flow, ...]:
    """The flows that run as queries: every flow but those a head carries (a member with a
    checkpoint of its own catches up, whether or not its head runs too)."""
    catching_up = {m for f in fusions.values() for m in f.catching_up}
    return tuple(
        f
        for f in flows
        if not fusion.is_member(f)
        or f.name in catching_up
        or (fusion_head(f.name) not in flows and folder_exists(spark, config.checkpoint(f.name)))
    )


@monitored  # progress events into <lake>/_system/stream_progress, live progress
def run_available_now(
    spark: SparkSession,
    config: Config,
    flows: Sequence[Flow] | None = None,
    register_names: bool = True,
    interrupt: threading.Event | None = None,
    locked: bool = False,
) -> RunReport:
    """Process everything that has landed, each flow after those it reads from, and return the
    run's summary. ``register_names=False`` leaves the tables unnamed in the session catalog
    (a process that ends with the run has no use for the names). When ``interrupt`` is set
    (Ctrl-C), the running queries are stopped and :class:`KeyboardInterrupt` is raised: each
    stream resumes from its checkpoint, its batch in flight replayed.

    The run holds its streams' locks: a second writer of any of them is refused.
    ``locked=True``: the caller holds them already (an erasure drains the lake under its own).
    """
    chosen = chosen_flows(spark, config, flows)
    if chosen is None:
        return nothing_to_run(config)
    config, flows = chosen
    if locked:
        return _run_available_now(spark, config, flows, register_names, interrupt)
    with _locks(config, flows, "available now"):
        return _run_available_now(spark, config, flows, register_names, interrupt)


def _run_available_now(
    spark: SparkSession,
    config: Config,
    flows: tuple[Flow, ...],
    register_names: bool,
    interrupt: threading.Event | None = None,
) -> RunReport:
    fusions = {f.head.name: f for f in fusion.plans(spark, config, flows)}
    flows = _runnable(spark, config, flows, fusions)
    refuse_unsafe_starts(spark, config, flows)
    _prepare(spark, config, flows, register_names)
    record_gaps(spark, config, flows)
    before = table_versions(spark, config)
    stages_before = dict(STAGE_CLOCK.seconds)
    finished, flow_seconds = drain(spark, config, flows, fusions, interrupt)
    check_landing(config, flows)  # replaced while this run read the folder
    record_gaps(spark, config, flows)
    for fused in fusions.values():
        if fused.catching_up:
            fusion.finish_catching_up(spark, config, fused)
    report = summarize(spark, config, before, finished)
    report.flow_seconds = flow_seconds
    for name in flow_seconds:  # a flow with nothing to read ran no batch
        report.batches.setdefault(name, 0)
    report.stage_seconds = {
        stage: round(seconds - stages_before.get(stage, 0.0), 3)
        for stage, seconds in STAGE_CLOCK.seconds.items()
    }
    # Only the tables this run committed to can have gained small files.
    written = [
        t
        for t in _written_tables(config, flows)
        if t.key not in before or table_version(spark, t) != before[t.key]
    ]
    report.compacted = compact_fragmented(spark, written)
    return report


# Called with the running queries of a continuous run, for a display.
Watcher = Callable[[Sequence[tuple[Flow, StreamingQuery]]], None]


def _watch(watch: Watcher, running: Sequence[tuple[Flow, StreamingQuery]]) -> None:
    """A display's failure is logged, never the run's."""
    try:
        watch(running)
    except Exception:  # noqa: BLE001 - the streams go on without their display
        log.debug("the live display failed", exc_info=True)


@monitored
def run_streaming(
    spark: SparkSession,
    config: Config,
    stop: threading.Event,
    flows: Sequence[Flow] | None = None,
    register_names: bool = True,
    watch: Watcher | None = None,
) -> RunReport:
    """Run every flow with processing-time triggers until ``stop`` is set, then stop cleanly.

    Queries stop together, each after its in-flight batch. A failed query stops the others and
    raises :class:`PipelineError`. The run holds its streams' locks until it ends; one lost
    (medallion/locks.py) stops every query at once: :class:`~medallion.locks.LeaseLost`.
    ``register_names`` as for :func:`run_available_now`. ``watch`` is called about twice a
    second with the running queries (the live table of medallion/streams/live.py).
    """
    chosen = chosen_flows(spark, config, flows)
    if chosen is None:
        return nothing_to_run(config)
    config, flows = chosen
    with _locks(config, flows, "stream") as locks:
        return _run_streaming(spark, config, stop, flows, register_names, watch, locks)


def _run_streaming(
    spark: SparkSession,
    config: Config,
    stop: threading.Event,
    flows: tuple[Flow, ...],
    register_names: bool,
    watch: Watcher | None,
    locks: StreamLocks,
) -> RunReport:
    if is_connect_session(spark):
        raise PipelineError(
            "a continuous run over Spark Connect is not supported: its foreachBatch functions "
            "share one session, so the settings that tag their writes could skip each other's "
            "writes. Run available-now over Connect, or --stream on a classic cluster or locally."
        )
    fusions = {f.head.name: f for f in fusion.plans(spark, config, flows)}
    flows = _runnable(spark, config, flows, fusions)
    refuse_unsafe_starts(spark, config, flows)
    _prepare(spark, config, flows, register_names)
    record_gaps(spark, config, flows)
    before = table_versions(spark, config)
    behind = [f for f in fusions.values() if f.catching_up]
    if behind:
        # Members catch up first, with available-now runs; then every head streams fused.
        catching_up = {m for f in behind for m in f.catching_up}
        group = tuple(f for f in flows if f.name in fusions or f.name in catching_up)
        log.info("catching up first: %s", ", ".join(sorted(catching_up)))
        drain(spark, config, group, fusions)
        for fused in behind:
            fusion.finish_catching_up(spark, config, fused)
        fusions = {f.head.name: fusion.plan(spark, config, f.head) for f in fusions.values()}
        flows = tuple(f for f in flows if f.name not in catching_up)
    for fused in fusions.values():
        fusion.mark_fused(spark, config, fused.head)
    queries = ContinuousQueries(
        spark,
        config,
        flows,
        _written_tables(config, flows),
        lambda flow, trigger: start_query(spark, config, flow, trigger, fusions),
        locks,
    )
    try:
        queries.start()
        next_landing_check = time.monotonic() + LANDING_CHECK_SECONDS
        while not stop.wait(0.5):
            locks.check()  # a lost lock: stop writing, before its lease can lapse
            if not queries.pause_if_asked(stop):
                break
            if time.monotonic() >= next_landing_check:
                check_landing(config, list(flows))
                try:
                    record_gaps(spark, config, flows)
                except PySparkException as error:  # the next check catches up
                    log.warning("could not check for input gaps yet: %s", error_summary(error))
                next_landing_check = time.monotonic() + LANDING_CHECK_SECONDS
            queries.restart_failed(lambda flow, error: describe_failure(flow, config, error))
            if watch is not None:
                _watch(watch, queries.running)
    finally:
        queries.stop(at_once=locks.lost.is_set())
    record_gaps(spark, config, flows)
    return summarize(spark, config, before, queries.by_name())
