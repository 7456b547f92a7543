"""Run the flows: layer by layer with available-now triggers, or all at once until stopped."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from medallion.compaction import BackgroundCompactor, compact_fragmented
from medallion.config import Config, TableRef
from medallion.conflicts import is_concurrent_metadata_change
from medallion.errors import PipelineError
from medallion.gaps import gaps_table_spec
from medallion.locks import stream_locks
from medallion.ops.monitor import PROGRESS_PROPERTIES, PROGRESS_SCHEMA, monitored, progress_table
from medallion.ops.schema import is_restartable_schema_change, schema_mismatch_in
from medallion.parallel import in_parallel
from medallion.session import is_connect_session
from medallion.streams.checkpoints import lost_checkpoint, replaced_landing_files
from medallion.streams.flows import FLOWS, Flow, flows_by_layer
from medallion.streams.kafka_gaps import kafka_data_loss_hint, record_kafka_gaps
from medallion.streams.missing_files import (
    missing_file_hint,
    missing_files_refusal,
    record_missing_files,
    start_checking,
)
from medallion.streams.sinks import Trigger
from medallion.tables import ensure_tables, history, read_table, table_version

log = logging.getLogger(__name__)

# What a batch cut short by StreamingQuery.stop() raises inside its foreachBatch.
_STOP_INTERRUPTIONS = ("java.lang.InterruptedException", "cancelled part of cancelled job group")


class _InterruptedBatchNote(logging.Filter):
    """Py4J logs the traceback of a foreachBatch that ``stop()`` interrupted; that batch is not
    committed and is replayed from its checkpoint, so say so in one line instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if error is not None and any(text in str(error) for text in _STOP_INTERRUPTIONS):
            record.msg, record.args, record.exc_info, record.exc_text = (
                "a batch in flight was interrupted by the stop; its stream replays it from "
                "the checkpoint when it next starts",
                (),
                None,
                None,
            )
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


logging.getLogger("py4j.clientserver").addFilter(_InterruptedBatchNote())

# How often a streaming run checks that no landing file it read was replaced since, and
# records input lost before it was read.
LANDING_CHECK_SECONDS = 30.0


@dataclass
class TableSummary:
    """What one run did to one table."""

    table: str
    rows_in: int = 0
    rows_out: int = 0
    quarantined: int = 0
    total_rows: int = 0


@dataclass
class RunReport:
    """Per-table summary and per-stream batch counts of one run."""

    tables: list[TableSummary] = field(default_factory=list)
    batches: dict[str, int] = field(default_factory=dict)
    # Wall seconds per layer of an available-now run (its streams run together).
    layer_seconds: dict[str, float] = field(default_factory=dict)
    # The tables whose small files the run compacted (medallion/compaction.py).
    compacted: list[str] = field(default_factory=list)

    def table(self, key: str) -> TableSummary:
        """The summary of one table."""
        return next(t for t in self.tables if t.table == key)

    def render(self) -> str:
        """A fixed-width text table for the terminal."""
        header = (
            f"{'table':<32}{'rows in':>10}{'rows out':>10}{'quarantined':>13}{'total rows':>12}"
        )
        lines = [header, "-" * len(header)]
        for t in self.tables:
            lines.append(
                f"{t.table:<32}{t.rows_in:>10}{t.rows_out:>10}{t.quarantined:>13}{t.total_rows:>12}"
            )
        if self.compacted:
            lines.append(f"compacted small files: {', '.join(self.compacted)}")
        return "\n".join(lines)


def _short(error: BaseException) -> str:
    """The first meaningful line of an error, without a JVM stack trace."""
    text = getattr(error, "desc", None) or str(error)
    mismatch = schema_mismatch_in(text)  # raised inside foreachBatch: its message, whole
    if mismatch:
        return mismatch
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("at ", "JVM stacktrace", "===")):
            return line[:500]
    return type(error).__name__


def describe_failure(flow: Flow, config: Config, error: BaseException) -> PipelineError:
    """A PipelineError that says which stream failed, where, why, and the way out when
    there is a documented one."""
    text = getattr(error, "desc", None) or str(error)
    hints = [missing_file_hint(text), kafka_data_loss_hint(error, config)]
    way_out = "".join(f"; {hint}" for hint in hints if hint)
    return PipelineError(
        f"stream '{flow.name}' ({flow.reads} -> {', '.join(flow.writes)}) failed; "
        f"checkpoint {config.checkpoint(flow.name)}: {_short(error)}{way_out}"
    )


def _versions(spark: SparkSession, config: Config) -> dict[str, int]:
    """The current version of every table (they exist: ``_prepare`` made sure), from the
    Delta logs' listings where the tables are paths."""
    tables = config.tables()
    latest = in_parallel(lambda table: table_version(spark, table) or 0, tables, "versions")
    return {table.key: version for table, version in zip(tables, latest, strict=True)}


def _rows_written(spark: SparkSession, config: Config, key: str, since: int) -> int:
    """Rows inserted, updated or deleted in a table by the commits after version ``since``
    (only those commits of the history are read)."""
    table = config.table(key)
    new_commits = (table_version(spark, table) or 0) - since
    if new_commits <= 0:
        return 0
    total = 0
    for row in history(spark, table, new_commits).collect():
        if row["version"] <= since:
            continue
        metrics = row["operationMetrics"] or {}
        if row["operation"] == "MERGE":
            changed = ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted")
            total += sum(int(metrics.get(name, 0)) for name in changed)
        elif row["operation"] in ("WRITE", "STREAMING UPDATE"):
            total += int(metrics.get("numOutputRows", 0))
    return total


def _written_tables(config: Config, flows: Sequence[Flow]) -> list[TableRef]:
    """The tables the flows write, and the progress table the run appends to."""
    keys = dict.fromkeys(key for flow in flows for key in flow.writes)
    return [*(config.table(key) for key in keys), progress_table(config)]


def _summarize(
    spark: SparkSession, config: Config, before: dict[str, int], queries: dict[str, StreamingQuery]
) -> RunReport:
    report = RunReport()
    rows_in: dict[str, int] = {}
    for name, query in queries.items():
        progress = query.recentProgress
        report.batches[name] = len(progress)
        rows_in[name] = sum(p.numInputRows for p in progress)

    def summary(written: tuple[Flow, str]) -> TableSummary:
        flow, key = written
        # A flow's input counts once, against its main table, not its side outputs.
        primary = key == flow.writes[0]
        result = TableSummary(key, rows_in=rows_in.get(flow.name, 0) if primary else 0)
        result.rows_out = _rows_written(spark, config, key, before.get(key, -1))
        result.total_rows = read_table(spark, config.table(key)).count()
        return result

    report.tables = in_parallel(
        summary, [(flow, key) for flow in FLOWS for key in flow.writes], "summary"
    )
    for main, quarantine in (
        ("silver/events", "silver/events_quarantine"),
        ("silver/customers", "silver/customers_quarantine"),
    ):
        report.table(main).quarantined = report.table(quarantine).rows_out
    return report


def _prepare(spark: SparkSession, config: Config) -> None:
    progress = (progress_table(config), PROGRESS_SCHEMA, PROGRESS_PROPERTIES)
    ensure_tables(spark, config, more=[progress, gaps_table_spec(config)])
    for dataset in ("events", "customers") if config.source == "files" else ():
        path = config.landing_dir(dataset)
        if "://" not in path and not path.startswith("/Volumes/"):
            os.makedirs(path, exist_ok=True)


# How often one query may be restarted after a restartable failure, in one run.
MAX_RESTARTS = 5


def _restartable(error: BaseException | None) -> bool:
    """A failure a restart cures: the batch is replayed from the checkpoint, exactly once.

    - its Delta source gained a column (opt-in schema evolution upstream): a restart reads the
      new schema from where the checkpoint stands;
    - a concurrent commit changed a table's metadata or protocol under a write (an
      ``ALTER TABLE ... SET TBLPROPERTIES`` during the run).
    """
    return is_restartable_schema_change(error) or is_concurrent_metadata_change(error)


def _why_restart(error: BaseException | None) -> str:
    if is_restartable_schema_change(error):
        return "its source's schema changed"
    return "a concurrent commit changed a table's metadata under its write"


def _check_landing(config: Config, flows: Sequence[Flow]) -> None:
    """Stop with a PipelineError when a landing file a flow read has been replaced since."""
    for flow in flows:
        refusal = replaced_landing_files(config, flow.name, flow.reads)
        if refusal:
            raise PipelineError(refusal)


def _refuse_unsafe_starts(spark: SparkSession, config: Config, flows: Sequence[Flow]) -> None:
    """Before a run touches anything: refuse a flow whose checkpoint was lost while its tables
    hold data, or one that read a landing file that has been replaced since."""
    for flow in flows:
        refusal = lost_checkpoint(spark, config, flow.name, flow.writes) or missing_files_refusal(
            config, flow.name, flow.reads
        )
        if refusal:
            raise PipelineError(refusal)
    _check_landing(config, flows)


def _record_gaps(spark: SparkSession, config: Config, flows: Sequence[Flow]) -> None:
    """Record input that bronze lost before it could read it (medallion/gaps.py), for the
    batches committed since the last check: a run catches up on one a crash cut short."""
    for flow in flows:
        if flow.layer != "bronze":
            continue
        if config.source == "kafka":
            record_kafka_gaps(spark, config, flow.name)
        else:
            start_checking(config, flow.name, flow.reads)
            record_missing_files(spark, config, flow.name, flow.reads, flow.writes[0])


def _start(spark: SparkSession, config: Config, flow: Flow, trigger: Trigger) -> StreamingQuery:
    """Start one flow; a failure to start names the stream, its checkpoint and the cause."""
    try:
        return flow.start(spark, config, trigger)
    except PySparkException as error:
        raise describe_failure(flow, config, error) from error


def _locks(config: Config, flows: tuple[Flow, ...], how: str):
    """The locks of the flows' streams, held for a whole run (medallion/locks.py)."""
    return stream_locks(config, [f.name for f in flows], f"medallion run ({how})")


@monitored  # progress events into <lake>/_system/stream_progress, live progress
def run_available_now(
    spark: SparkSession, config: Config, flows: tuple[Flow, ...] = FLOWS
) -> RunReport:
    """Process everything that has landed, layer by layer, and return the run's summary.

    The run holds its streams' locks: a second writer of any of them is refused.
    """
    with _locks(config, flows, "available now"):
        return _run_available_now(spark, config, flows)


def _run_available_now(spark: SparkSession, config: Config, flows: tuple[Flow, ...]) -> RunReport:
    _refuse_unsafe_starts(spark, config, flows)
    _prepare(spark, config)
    _record_gaps(spark, config, flows)
    before = _versions(spark, config)
    trigger = Trigger(available_now=True)
    finished: dict[str, StreamingQuery] = {}
    # Over Spark Connect every foreachBatch shares the client's session, so the txnAppId /
    # txnVersion confs of concurrent flows could tag each other's writes: run them one by one.
    one_at_a_time = is_connect_session(spark)
    layer_seconds: dict[str, float] = {}
    for layer, layer_flows in flows_by_layer(flows):
        started = time.monotonic()
        groups = [[f] for f in layer_flows] if one_at_a_time else [layer_flows]
        for group in groups:
            finished.update(_run_group(spark, config, layer, group, trigger))
        layer_seconds[layer] = round(time.monotonic() - started, 3)
    _check_landing(config, flows)  # replaced while this run read the folder
    _record_gaps(spark, config, flows)
    report = _summarize(spark, config, before, finished)
    report.layer_seconds = layer_seconds
    # Only the tables this run committed to can have gained small files.
    written = [
        t
        for t in _written_tables(config, flows)
        if t.key not in before or table_version(spark, t) != before[t.key]
    ]
    report.compacted = compact_fragmented(spark, written)
    return report


def _run_group(
    spark: SparkSession, config: Config, layer: str, flows: list[Flow], trigger: Trigger
) -> dict[str, StreamingQuery]:
    """Start flows together and wait for all of them; stop the rest if one fails."""
    started = []
    finished = {}
    for flow in flows:
        log.info("starting %s (%s, available now)", flow.name, layer)
        started.append((flow, _start(spark, config, flow, trigger)))
    for position, (flow, query) in enumerate(started):
        restarts = 0
        while True:
            try:
                query.awaitTermination()
                break
            except PySparkException as error:
                if _restartable(error) and restarts < MAX_RESTARTS:
                    log.info("%s: %s; restarting it", flow.name, _why_restart(error))
                    restarts += 1
                    query = _start(spark, config, flow, trigger)
                    started[position] = (flow, query)
                    continue
                for _, other in started:
                    other.stop()
                raise describe_failure(flow, config, error) from error
        finished[flow.name] = query
        log.info("%s done: %d batches", flow.name, len(query.recentProgress))
    return finished


def _progress_stamp(query: StreamingQuery) -> str | None:
    """The timestamp of the query's last reported trigger (None before the first)."""
    progress = query.lastProgress
    return progress.get("timestamp") if progress else None


def _stop_gracefully(query: StreamingQuery, deadline: float) -> None:
    """Stop a query once its in-flight batch has completed (or at ``deadline``, monotonic).

    With a backlog a query starts its next batch right after the last, so it is rarely seen
    idle: the batch in flight has completed when the query is idle or has reported a newer
    progress than when the stop began. A batch cut short by the deadline (or the next batch,
    started a moment before ``stop``) is safe too: it is replayed from the checkpoint.
    """
    in_flight_since = _progress_stamp(query)
    while query.isActive and time.monotonic() < deadline:
        if not query.status.get("isTriggerActive") or _progress_stamp(query) != in_flight_since:
            break
        time.sleep(0.05)
    query.stop()


def _stop_all(queries: list[StreamingQuery], deadline: float) -> None:
    """Stop every query after its in-flight batch, all at once: a stop takes as long as the
    longest batch in flight, not the sum of them (the streams are independent: each resumes
    from its own checkpoint)."""
    stoppers = [
        threading.Thread(target=_stop_gracefully, args=(q, deadline), name=f"stop-{q.name}")
        for q in queries
        if q.isActive
    ]
    for stopper in stoppers:
        stopper.start()
    for stopper in stoppers:
        stopper.join()


@monitored
def run_streaming(
    spark: SparkSession, config: Config, stop: threading.Event, flows: tuple[Flow, ...] = FLOWS
) -> RunReport:
    """Run every flow with processing-time triggers until ``stop`` is set, then stop cleanly.

    Queries stop together, each after its in-flight batch. A failed query stops the others and
    raises :class:`PipelineError`. The run holds its streams' locks until it ends.
    """
    with _locks(config, flows, "stream"):
        return _run_streaming(spark, config, stop, flows)


def _run_streaming(
    spark: SparkSession, config: Config, stop: threading.Event, flows: tuple[Flow, ...]
) -> RunReport:
    if is_connect_session(spark):
        raise PipelineError(
            "a continuous run over Spark Connect is not supported: its foreachBatch functions "
            "share one session, so their txnAppId/txnVersion settings could skip each other's "
            "writes. Run available-now over Connect, or --stream on a classic cluster or locally."
        )
    _refuse_unsafe_starts(spark, config, flows)
    _prepare(spark, config)
    _record_gaps(spark, config, flows)
    before = _versions(spark, config)
    trigger = Trigger(available_now=False, interval_seconds=config.trigger_interval_seconds)
    running: list[tuple[Flow, StreamingQuery]] = []
    compactor = BackgroundCompactor(
        spark, _written_tables(config, flows), config.compaction_check_seconds
    )
    compactor.start()
    try:
        for flow in flows:
            log.info("starting %s (every %ss)", flow.name, config.trigger_interval_seconds)
            running.append((flow, _start(spark, config, flow, trigger)))
        restarts = 0
        next_landing_check = time.monotonic() + LANDING_CHECK_SECONDS
        while not stop.wait(0.5):
            if time.monotonic() >= next_landing_check:
                _check_landing(config, [f for f, _ in running])
                try:
                    _record_gaps(spark, config, flows)
                except PySparkException as error:  # the next check catches up
                    log.warning("could not check for input gaps yet: %s", _short(error))
                next_landing_check = time.monotonic() + LANDING_CHECK_SECONDS
            for position, (flow, query) in enumerate(running):
                if not query.isActive:
                    error = query.exception()
                    if _restartable(error) and restarts < MAX_RESTARTS * len(running):
                        log.info("%s: %s; restarting it", flow.name, _why_restart(error))
                        restarts += 1
                        running[position] = (flow, _start(spark, config, flow, trigger))
                        continue
                    raise describe_failure(
                        flow, config, error or RuntimeError("stopped unexpectedly")
                    )
    finally:
        # One deadline for all queries, so a stop takes at most stop_timeout_seconds in all.
        deadline = time.monotonic() + config.stop_timeout_seconds
        _stop_all([query for _, query in running], deadline)
        compactor.finish(timeout=max(0.0, deadline - time.monotonic()))
    _record_gaps(spark, config, flows)
    return _summarize(spark, config, before, {f.name: q for f, q in running})
