"""``medallion run``: its Delta source flags, the Config its arguments make (source settings,
carried columns, Kafka topics), and the run itself, with its signal handlers and live table."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import TYPE_CHECKING

from medallion import console
from medallion.argtypes import AT_LEAST_ONE, byte_size, starting_version
from medallion.cli_arguments import carried_columns, print_json
from medallion.config import Config, parse_settings
from medallion.console import step
from medallion.deployment import checked, pipelines_of
from medallion.errors import ConfigError
from medallion.pipelines import all_datasets
from medallion.run_options import flag_help
from medallion.session import get_spark, packages_for
from medallion.source_options import DeltaSourceOptions, KafkaSourceOptions
from medallion.streams.run_size import run_jvm_options
from medallion.task_params import TOPIC_SUFFIX

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from medallion.streams.runner import Watcher

log = logging.getLogger("medallion")


def add_delta_source_arguments(run: argparse.ArgumentParser) -> None:
    """The Delta source flags of ``medallion run``, as a group of their own."""
    delta = run.add_argument_group(
        "Delta source",
        "options of every Delta-to-Delta stream (those of silver and gold); "
        "see docs/delta-streaming.md",
    )
    start = delta.add_mutually_exclusive_group()
    start.add_argument(
        "--starting-version",
        type=starting_version,
        metavar="N|latest",
        help=flag_help("--starting-version"),
    )
    start.add_argument(
        "--starting-timestamp",
        metavar="TIMESTAMP",
        help=flag_help("--starting-timestamp"),
    )
    delta.add_argument(
        "--delta-max-files-per-trigger",
        type=AT_LEAST_ONE,
        metavar="N",
        help=flag_help("--delta-max-files-per-trigger"),
    )
    delta.add_argument(
        "--delta-max-bytes-per-trigger",
        type=byte_size,
        metavar="SIZE",
        help=flag_help("--delta-max-bytes-per-trigger"),
    )
    delta.add_argument(
        "--no-skip-change-commits",
        dest="skip_change_commits",
        action="store_false",
        help=flag_help("--no-skip-change-commits"),
    )
    delta.add_argument(
        "--with-event-time-order",
        action="store_true",
        help=flag_help("--with-event-time-order"),
    )


def delta_source_options_from_args(args: argparse.Namespace) -> DeltaSourceOptions:
    """The :class:`DeltaSourceOptions` of ``medallion run``'s Delta source flags."""
    if args.starting_version == "latest" and not getattr(args, "stream", False):
        log.warning(
            "--starting-version latest without --stream reads nothing: an availableNow run ends "
            "at the version that was latest when it started (docs/delta-streaming.md)"
        )
    return DeltaSourceOptions(
        starting_version=args.starting_version,
        starting_timestamp=args.starting_timestamp,
        max_files_per_trigger=args.delta_max_files_per_trigger,
        max_bytes_per_trigger=args.delta_max_bytes_per_trigger,
        skip_change_commits=args.skip_change_commits,
        with_event_time_order=args.with_event_time_order,
    )


def topic_arguments(args: argparse.Namespace) -> dict[str, str]:
    """The topics ``--<dataset>-topic`` names, by dataset."""
    return {dataset: getattr(args, f"{dataset}{TOPIC_SUFFIX}") for dataset in all_datasets()}


def _install_stop_handlers(stop: threading.Event) -> None:
    def request_stop(signum: int, _frame: object) -> None:
        step(log, "received %s: stopping after the batches in flight", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)


def _install_interrupt_handler(interrupt: threading.Event) -> None:
    """Ctrl-C asks the run to stop its queries (the runner raises KeyboardInterrupt when it
    sees the request, outside any call into the JVM); a second Ctrl-C stops at once."""

    def request_interrupt(_signum: int, _frame: object) -> None:
        if interrupt.is_set():
            raise KeyboardInterrupt
        interrupt.set()

    signal.signal(signal.SIGINT, request_interrupt)


def cmd_run(args: argparse.Namespace) -> int:
    """``medallion run``: the Config its arguments make, run available now or as a stream."""
    # deferred: loads pyspark
    from medallion.streams.runner import run_available_now, run_streaming

    if args.source == "files" and not args.landing:
        raise ConfigError("--landing is required with --source files")
    config = Config(
        landing=os.path.abspath(args.landing or args.lake),  # unused by the Kafka source
        lake=os.path.abspath(args.lake),
        trigger_interval_seconds=args.interval,
        max_files_per_trigger=args.max_files_per_trigger,
        skip_missing_files=args.skip_missing_files,
        source=args.source,
        kafka=KafkaSourceOptions(
            bootstrap_servers=args.kafka_bootstrap,
            topics=topic_arguments(args),
            starting_offsets=args.starting_offsets,
            max_offsets_per_trigger=args.max_offsets_per_trigger,
            secret_scope=args.kafka_secret_scope,
            fail_on_data_loss=not args.kafka_accept_data_loss,
        ),
        delta_source=delta_source_options_from_args(args),
        carried_columns=carried_columns(args.carry_column, args.pipeline),
        pipelines=tuple(args.pipeline),
        settings=parse_settings(args.settings),
    )
    checked(config)  # a misspelt setting or pipeline is an error before Spark starts
    pipelines_of(config)
    stop = threading.Event()
    if args.stream:
        _install_stop_handlers(stop)
    spark = get_spark(packages=packages_for(config), java=run_jvm_options(config, args.stream))
    if args.stream:
        _install_stop_handlers(stop)  # pyspark installs its own SIGINT handler with the context
        # The process ends with the run: the session catalog's names would serve nobody.
        with _live_table(args, spark, config) as watch:
            report = run_streaming(spark, config, stop, register_names=False, watch=watch)
    else:
        interrupt = threading.Event()
        _install_interrupt_handler(interrupt)
        report = run_available_now(spark, config, register_names=False, interrupt=interrupt)
    if args.output == "json":
        print_json(asdict(report))
    else:
        console.show(report.render())
    return 0


@contextmanager
def _live_table(
    args: argparse.Namespace, spark: SparkSession, config: Config
) -> Iterator[Watcher | None]:
    """The live table of streams while a ``--stream`` run lasts, on a terminal only."""
    if args.no_live or args.verbose or not sys.stderr.isatty():
        yield None
        return
    # deferred: loads pyspark
    from medallion.ops.status import backlog
    from medallion.streams.live import LiveStreams

    with LiveStreams(lambda flow: backlog(spark, config, flow)) as live:
        yield live.update
