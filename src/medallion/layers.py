"""What a job task or a notebook calls: run one layer's flows, or a named set of flows.

A task of the bundle's jobs (each pipeline's: medallion/pipeline_jobs.py) runs one notebook,
and every notebook is a few calls into this module::

    params = notebook_params(globals())          # medallion.task_params: widgets or variables
    report = run_task(params, layer="silver")    # the declared flows of layer silver
    print(report)

Parameters are text, as widgets and job parameters are (medallion/task_params.py).
``trigger=available_now`` drains what has landed and returns;
``trigger=processing_time`` keeps the flows running until SIGINT or SIGTERM (a cancelled job
run, or ``medallion job run --stream``).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from argparse import ArgumentTypeError
from collections.abc import Sequence
from dataclasses import fields

from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from medallion.argtypes import point_in_time
from medallion.config import Config
from medallion.conflicts import retry
from medallion.console import plain
from medallion.declarations import landing_datasets
from medallion.deployment import flows_of
from medallion.errors import ConfigError
from medallion.ops.erasure_requests import erase_requested
from medallion.ops.maintain import maintain as maintain_tables
from medallion.ops.maintain import render
from medallion.ops.replay import render_results, replay_quarantines
from medallion.pipelines import all_datasets
from medallion.session import get_spark, is_connect_session, packages_for, session_kind
from medallion.sql_names import quote_identifier
from medallion.streams.flows import Flow, all_flows, fusion_head
from medallion.streams.run_report import RunReport, TableSummary
from medallion.streams.runner import run_available_now, run_streaming
from medallion.tables import ensure_tables, in_lake
from medallion.task_params import TOPIC_SUFFIX, VOLUMES_PREFIX, TaskParams, true_or_false

log = logging.getLogger(__name__)


def select_flows(
    layer: str | None, names: Sequence[str] = (), flows: Sequence[Flow] | None = None
) -> tuple[Flow, ...]:
    """The flows to run among ``flows`` (default: every declared one): the named ones (which
    must belong to ``layer`` when it is given), or every flow of ``layer``. A flow fused into
    another (silver_events into bronze_events) runs with it, in its layer's task
    (streams/fusion.py). Raises :class:`ConfigError` naming what is unknown."""
    flows = all_flows() if flows is None else flows
    known = {f.name: f for f in flows if fusion_head(f.name) is None}
    if names:
        fused = {n: head.name for n in names if (head := fusion_head(n)) is not None}
        if fused:
            raise ConfigError(
                "; ".join(f"{n} runs inside {head}: name {head}" for n, head in fused.items())
            )
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ConfigError(f"unknown flows {', '.join(unknown)}; known: {', '.join(known)}")
        elsewhere = [n for n in names if layer is not None and known[n].layer != layer]
        if elsewhere:
            raise ConfigError(f"flows {', '.join(elsewhere)} are not in layer {layer!r}")
        return tuple(f for f in known.values() if f.name in names)
    if layer is None:
        raise ConfigError(f"name the flows to run (comma-separated): {', '.join(known)}")
    selected = tuple(f for f in known.values() if f.layer == layer)
    if not selected:
        layers = sorted({f.layer for f in flows})
        raise ConfigError(f"no flows in layer {layer!r}; layers: {', '.join(layers)}")
    return selected


def volume_of(path: str) -> tuple[str, str, str] | None:
    """``(catalog, schema, volume)`` of a ``/Volumes/...`` path, else None.

    >>> volume_of("/Volumes/main/medallion/landing/events")
    ('main', 'medallion', 'landing')
    """
    if not path.startswith(VOLUMES_PREFIX):
        return None
    parts = path[len(VOLUMES_PREFIX) :].split("/")
    if len(parts) < 3 or not all(parts[:3]):
        raise ConfigError(f"a volume path is /Volumes/<catalog>/<schema>/<volume>/...: {path!r}")
    return parts[0], parts[1], parts[2]


def prepare_storage(
    spark: SparkSession, config: Config, tables: bool = True, attempts: int = 10
) -> None:
    """Create what the flows need before they start: volumes, landing folders, tables.

    Unity Catalog volumes named by the landing, lake and checkpoint paths are created if
    missing (``CREATE VOLUME IF NOT EXISTS``). With ``tables``, the tables too: tasks of a
    continuous job start together and race to create the same tables, so that step is retried
    (each try keeps what the others created) after a random pause. (An available-now run
    creates its tables itself, one task after another.)
    """
    paths = (config.landing, config.lake, config.checkpoint_root or "")
    for volume in dict.fromkeys(v for v in map(volume_of, paths) if v is not None):
        spark.sql(f"CREATE SCHEMA IF NOT EXISTS {quote_identifier(*volume[:2])}")
        spark.sql(f"CREATE VOLUME IF NOT EXISTS {quote_identifier(*volume)}")

    # A local folder, or a volume through its FUSE mount on a Databricks cluster.
    local_files = volume_of(config.landing) is None or session_kind() == "databricks"
    if local_files and "://" not in config.landing:
        for dataset in landing_datasets(flows_of(config)):
            os.makedirs(config.landing_dir(dataset), exist_ok=True)
    if not tables:
        return
    retry(
        lambda: ensure_tables(spark, config),
        "creating the tables (racing another task)",
        lambda error: isinstance(error, PySparkException),
        attempts,
        backoff_seconds=0.5,
        max_backoff_seconds=2.0,
        level=logging.INFO,
    )


def stop_on_signals() -> threading.Event:
    """An event set by SIGINT or SIGTERM (from the main thread; elsewhere, never set)."""
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():

        def request_stop(signum: int, _frame: object) -> None:
            name = signal.Signals(signum).name
            log.info("received %s: stopping after the batches in flight", name)
            stop.set()

        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)
    return stop


def run_flows(
    spark: SparkSession,
    config: Config,
    flows: Sequence[Flow],
    stream: bool = False,
    stop: threading.Event | None = None,
) -> RunReport:
    """Run ``flows``: available-now, layer by layer; or with processing-time triggers until
    ``stop`` is set (by default, until SIGINT or SIGTERM).

    Over Spark Connect (serverless, standard access mode, Databricks Connect) every
    ``foreachBatch`` function runs in the client's one session, so the confs that tag its
    MERGEs with their batch (streams/exactly_once.py) are not private to a stream there.
    Available-now runs therefore run one flow at a time on such a session; a streaming run
    with several flows is allowed but warned about (give each its own task instead).
    """
    prepare_storage(spark, config, tables=stream)
    flows = tuple(flows)
    connect = is_connect_session(spark)
    if stream:
        if connect and len(flows) > 1:
            log.warning(
                "%d streams share one Spark Connect session: their foreachBatch writes share "
                "the confs that tag them; run one flow per task for exactly-once writes",
                len(flows),
            )
        return run_streaming(spark, config, stop or stop_on_signals(), flows)
    if connect and len(flows) > 1:
        return combine_reports([run_available_now(spark, config, (f,)) for f in flows])
    return run_available_now(spark, config, flows)


def combine_reports(reports: Sequence[RunReport]) -> RunReport:
    """One report for several runs: rows added up, totals from the last run."""
    combined = RunReport()
    by_table: dict[str, TableSummary] = {}
    for report in reports:
        combined.batches.update(report.batches)
        combined.compacted += [key for key in report.compacted if key not in combined.compacted]
        for summary in report.tables:
            total = by_table.setdefault(summary.table, TableSummary(summary.table))
            total.rows_in += summary.rows_in
            total.rows_out += summary.rows_out
            total.quarantined += summary.quarantined
            total.total_rows = summary.total_rows
    combined.tables = list(by_table.values())
    return combined


def run_task(params: TaskParams, layer: str | None, spark: SparkSession | None = None) -> RunReport:
    """Run what one task asks for: ``params.flows`` or, when empty, every flow of ``layer``."""
    config = params.config()
    flows = select_flows(layer, params.flow_names, flows_of(config))
    spark = spark or get_spark(packages=packages_for(config))
    log.info("running %s (%s)", ", ".join(f.name for f in flows), params.trigger)
    return run_flows(spark, config, flows, stream=params.stream)


def maintain(spark: SparkSession, config: Config, vacuum_retention_hours: float = 168) -> list[str]:
    """Compact every table (``OPTIMIZE`` with Z-ordering) and safely ``VACUUM`` it.

    The maintenance task runs :func:`medallion.ops.maintain.maintain`, which refuses a
    retention that could delete files a stopped or lagging stream still needs
    (docs/operations.md). Returns the lines of its summary (files before/after per table).
    """
    prepare_storage(spark, config)
    results = maintain_tables(spark, config, vacuum_retention_hours=vacuum_retention_hours)
    return plain(render(results)).splitlines()


def maintain_task(params: TaskParams, vacuum_retention_hours: str = "168") -> list[str]:
    """The maintenance task: :func:`maintain` on the tables ``params`` describe."""
    try:
        hours = float(vacuum_retention_hours)
    except ValueError:
        raise ConfigError(f"invalid VACUUM retention {vacuum_retention_hours!r}") from None
    return maintain(get_spark(), params.config(), hours)


def replay_task(
    params: TaskParams, reason_like: str = "", since: str = "", dry_run: str = "false"
) -> list[str]:
    """The quarantine replay task: :func:`~medallion.ops.replay.replay_quarantines` on the
    quarantines of the pipelines ``params`` name, with the settings they give (the job's
    ``settings`` parameter widens the contract); one line per quarantine."""
    dry = true_or_false("dry_run", dry_run)
    try:
        moment = point_in_time(since.strip()) if since.strip() else None
    except ArgumentTypeError as error:
        raise ConfigError(f"since: {error}") from None
    spark = get_spark()
    config = in_lake(spark, params.config())
    results = replay_quarantines(spark, config, reason_like.strip() or None, moment, dry)
    return render_results(results, dry).splitlines()


def erase_task(
    params: TaskParams, request: str = "", dry_run: str = "false", vacuum: str = "false"
) -> list[str]:
    """The erasure task: the pending erasure request ``request`` (empty: every pending one,
    recorded by ``medallion erase --request``: ops/erasure_requests.py) carried out in the
    pipelines ``params`` name (default: every pipeline that declares subjects). The job's
    parameters never hold a subject's id."""
    dry = true_or_false("dry_run", dry_run)
    spark = get_spark()
    config = in_lake(spark, params.config())
    results = erase_requested(
        spark, config, request.strip() or None, dry, true_or_false("vacuum", vacuum)
    )
    if not results:
        return ["no pending erasure request"]
    return [line for result in results for line in result.describe(dry).splitlines()]


def task_arguments(argv: Sequence[str]) -> dict[str, str]:
    """A wheel task's named parameters (``--name=value``, as Databricks passes them) as a dict:
    ``--layer``, the task parameters (TaskParams) and each declared dataset's ``--<name>_topic``;
    any other is refused.

    >>> task_arguments(["--layer=silver", "--pipeline=retail", "--flows="])
    {'layer': 'silver', 'pipeline': 'retail', 'flows': ''}
    """
    parser = argparse.ArgumentParser(
        prog="medallion-task", add_help=False, allow_abbrev=False, exit_on_error=False
    )
    names = ("layer", *(f.name for f in fields(TaskParams)))
    for name in (*names, *(f"{d}{TOPIC_SUFFIX}" for d in all_datasets())):
        parser.add_argument(f"--{name}")
    try:
        known, unknown = parser.parse_known_args(argv)
    except argparse.ArgumentError as error:
        known, unknown = None, [str(error)]
    if known is None or unknown:
        raise ConfigError(f"a task's arguments are --name=value of a task parameter: {unknown[0]}")
    return {name: value for name, value in vars(known).items() if value is not None}


def main(argv: Sequence[str] | None = None) -> int:
    """The ``medallion-task`` entry point of the wheel: one layer of a job, as a Python wheel
    task runs it (serverless compute, retail's medallion_pipeline_serverless).

    ``--layer=bronze|silver|gold`` picks the layer; every other ``--name=value`` is a task
    parameter (medallion.task_params.TaskParams), the job's parameters pushed down to it.
    """
    values = task_arguments(sys.argv[1:] if argv is None else argv)
    layer = values.pop("layer", "") or None
    report = run_task(TaskParams.from_mapping(values), layer)
    print(report)
    return 0
