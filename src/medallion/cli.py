"""The ``medallion`` command line: thin argument parsing over the package's modules."""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Sequence

from medallion.config import (
    Config,
    ConfigError,
    DeltaSourceOptions,
    KafkaSourceOptions,
    parse_settings,
)
from medallion.ops.cli import add_pipeline_argument

log = logging.getLogger("medallion")

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _configure_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO, format=LOG_FORMAT, stream=sys.stderr
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be zero or more")
    return value


def _add_lake(parser: argparse.ArgumentParser, landing: bool) -> None:
    if landing:
        parser.add_argument("--landing", required=True, help="folder where input files land")
    parser.add_argument(
        "--lake", required=True, help="folder holding the Delta tables and checkpoints"
    )


def _starting_version(text: str) -> int | str:
    if text == "latest":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("use a table version (0 or more) or latest") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be zero or more")
    return value


def _at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


def _byte_size(text: str) -> str:
    # What Spark's byte strings accept: a number, optionally b, k(b), m(b), g(b), t(b) or p(b).
    size = re.fullmatch(r"([0-9]+)([kmgtp]b?|b)?", text, re.IGNORECASE)
    if size is None or int(size.group(1)) == 0:
        raise argparse.ArgumentTypeError("use a positive size such as 1048576, 512m or 1g")
    return text


def _add_delta_source(run: argparse.ArgumentParser) -> None:
    delta = run.add_argument_group(
        "Delta source",
        "options of every Delta-to-Delta stream (those of silver and gold); "
        "see docs/delta-streaming.md",
    )
    start = delta.add_mutually_exclusive_group()
    start.add_argument(
        "--starting-version",
        type=_starting_version,
        metavar="N|latest",
        help="where a new checkpoint starts reading its source table (no initial snapshot)",
    )
    start.add_argument(
        "--starting-timestamp",
        metavar="TIMESTAMP",
        help="start a new checkpoint at the first commit at or after this time (ISO-8601)",
    )
    delta.add_argument(
        "--delta-max-files-per-trigger",
        type=_at_least_one,
        metavar="N",
        help="source files per micro-batch (Delta's default: 1000)",
    )
    delta.add_argument(
        "--delta-max-bytes-per-trigger",
        type=_byte_size,
        metavar="SIZE",
        help="soft limit of source bytes per micro-batch, for example 512m",
    )
    delta.add_argument(
        "--no-skip-change-commits",
        dest="skip_change_commits",
        action="store_false",
        help="fail on an UPDATE, DELETE or MERGE upstream instead of skipping its commit",
    )
    delta.add_argument(
        "--with-event-time-order",
        action="store_true",
        help="read the initial snapshot in event-time order (Databricks Runtime only)",
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


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="medallion", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    gen = sub.add_parser("generate", help="write synthetic input files with faults")
    gen.add_argument("--landing", required=True)
    gen.add_argument(
        "--events",
        type=_positive_int,
        default=1000,
        help="records of each pipeline's main dataset (retail: events; default 1000)",
    )
    gen.add_argument(
        "--customers", type=_positive_int, default=200, help="retail's customer changes"
    )
    add_pipeline_argument(gen, default="every pipeline with a generator")
    gen.add_argument("--files", type=_positive_int, default=4)
    gen.add_argument("--seed", type=int, default=42)
    gen.add_argument("--duplicate-rate", type=float, default=0.05)
    gen.add_argument("--late-rate", type=float, default=0.05)
    gen.add_argument("--invalid-rate", type=float, default=0.04)
    gen.add_argument("--malformed-rate", type=float, default=0.02)

    run = sub.add_parser("run", help="process landed input through bronze, silver and gold")
    run.add_argument("--landing", help="folder where input files land (with --source files)")
    run.add_argument("--lake", required=True, help="folder of the Delta tables and checkpoints")
    run.add_argument("--stream", action="store_true", help="keep running until SIGINT/SIGTERM")
    run.add_argument(
        "--interval",
        type=float,
        default=Config.trigger_interval_seconds,
        help="with --stream: seconds between looks for new input while idle (a stream with "
        "input runs its batches back to back)",
    )
    run.add_argument(
        "--max-files-per-trigger", type=int, default=None, help="landing files per micro-batch"
    )
    run.add_argument(
        "--skip-missing-files",
        action="store_true",
        help="accept the loss of landed files deleted after they were listed: read the rest "
        "and record each one in <lake>/_system/data_gaps",
    )
    run.add_argument("--source", choices=("files", "kafka"), default="files", help="bronze's input")
    kafka = run.add_argument_group("Kafka source", "credentials: see docs/kafka.md")
    kafka.add_argument("--kafka-bootstrap", metavar="HOST:PORT[,...]", help="bootstrap servers")
    kafka.add_argument("--events-topic", default="events", help="topic of the events")
    kafka.add_argument("--customers-topic", default="customers", help="topic of customer changes")
    kafka.add_argument(
        "--starting-offsets",
        default="earliest",
        help="where a new checkpoint starts: earliest, latest or JSON",
    )
    kafka.add_argument("--max-offsets-per-trigger", type=int, help="records per micro-batch")
    kafka.add_argument("--kafka-secret-scope", help="Databricks secret scope of the credentials")
    kafka.add_argument(
        "--kafka-accept-data-loss",
        action="store_true",
        help="when records not read yet are gone (retention, a recreated topic), read what "
        "remains instead of stopping, and record the lost offsets in <lake>/_system/data_gaps",
    )
    _add_delta_source(run)
    add_pipeline_argument(run, default="every pipeline with input")
    run.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a pipeline setting, such as a rule's threshold (repeatable; "
        "`medallion pipelines` lists them)",
    )
    run.add_argument(
        "--carry-column",
        action="append",
        default=[],
        metavar="NAME",
        help="carry this input field into silver/events as a STRING column (repeatable; "
        "docs/operations.md)",
    )

    changes = sub.add_parser("changes", help="read a table's Change Data Feed (batch)")
    changes.add_argument("--lake", required=True)
    changes.add_argument("--table", default="silver/customers", help="for example silver/customers")
    start = changes.add_mutually_exclusive_group(required=True)
    start.add_argument("--from-version", type=int)
    start.add_argument("--from-timestamp", help="ISO-8601, for example 2026-11-20T10:00:00Z")
    changes.add_argument("--to-version", type=int)
    changes.add_argument("--to-timestamp")
    changes.add_argument("--rows", type=int, default=50)

    show = sub.add_parser("show", help="print tables of the lake")
    show.add_argument("--lake", required=True)
    show.add_argument("--layer", choices=("bronze", "silver", "gold"), default="gold")
    show.add_argument("--rows", type=int, default=20)
    add_pipeline_argument(show)

    from medallion.bundle.cli import add_job_parser

    add_job_parser(sub)  # medallion job list | run: the bundle's jobs (docs/bundle.md)
    from medallion.ops.cli import add_ops_parsers

    add_ops_parsers(sub)  # maintain | status | reset | pipelines (docs/operations.md)
    return parser


def _cmd_generate(args: argparse.Namespace) -> int:
    from medallion.generate import FaultRates
    from medallion.pipelines import generate_input

    faults = FaultRates(
        duplicate=args.duplicate_rate,
        late=args.late_rate,
        invalid=args.invalid_rate,
        malformed=args.malformed_rate,
    )
    from medallion.bundle.workspace import generate_to_volume, needs_files_api

    options = {
        "records": args.events,
        "customers": args.customers,
        "files": args.files,
        "seed": args.seed,
        "faults": faults,
    }
    try:
        if needs_files_api(args.landing):  # a Unity Catalog volume, from off Databricks
            written = generate_to_volume(None, args.landing, args.pipeline, **options)
        else:
            written = generate_input(args.landing, args.pipeline, **options)
    except KeyError as error:
        raise ConfigError(str(error.args[0])) from None
    for dataset, paths in written.items():
        print(f"{dataset}: {len(paths)} files in {args.landing}/{dataset}")
    return 0


def _install_stop_handlers(stop: threading.Event) -> None:
    def request_stop(signum: int, _frame: object) -> None:
        log.info("received %s: stopping after the batches in flight", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)


def _cmd_run(args: argparse.Namespace) -> int:
    from medallion.session import get_spark, packages_for
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
            events_topic=args.events_topic,
            customers_topic=args.customers_topic,
            starting_offsets=args.starting_offsets,
            max_offsets_per_trigger=args.max_offsets_per_trigger,
            secret_scope=args.kafka_secret_scope,
            fail_on_data_loss=not args.kafka_accept_data_loss,
        ),
        delta_source=delta_source_options_from_args(args),
        extra_event_columns=tuple(args.carry_column),
        pipelines=tuple(args.pipeline),
        settings=parse_settings(args.settings),
    )
    config.declared_pipelines()  # an unknown name is an error before Spark starts
    stop = threading.Event()
    if args.stream:
        _install_stop_handlers(stop)
    spark = get_spark(packages=packages_for(config))
    if args.stream:
        _install_stop_handlers(stop)  # pyspark installs its own SIGINT handler with the context
        # The process ends with the run: the session catalog's names would serve nobody.
        report = run_streaming(spark, config, stop, register_names=False)
    else:
        report = run_available_now(spark, config, register_names=False)
    print(report.render())
    return 0


def _cmd_changes(args: argparse.Namespace) -> int:
    from medallion.changes import read_changes
    from medallion.session import get_spark

    config = Config(landing=os.path.abspath(args.lake), lake=os.path.abspath(args.lake))
    changes = read_changes(
        get_spark(),
        config,
        args.table,
        from_version=args.from_version,
        to_version=args.to_version,
        from_timestamp=args.from_timestamp,
        to_timestamp=args.to_timestamp,
    )
    ordered = changes.orderBy("_commit_version", "_change_type")
    print(f"{ordered.count()} changes")
    ordered.show(args.rows, truncate=False)
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    from medallion.session import get_spark
    from medallion.tables import read_table, table_exists

    lake = os.path.abspath(args.lake)
    config = Config(landing=lake, lake=lake, pipelines=tuple(args.pipeline))
    config.declared_pipelines()
    spark = get_spark()
    for table in config.tables():
        if table.layer != args.layer or not table_exists(spark, table):
            continue
        df = read_table(spark, table)
        print(f"\n== {table.key} ({df.count()} rows)")
        order = [c for c in ("window_start", "product_id", "event_timestamp") if c in df.columns]
        (df.orderBy(*order) if order else df).show(args.rows, truncate=False)
    return 0


def _cmd_job(args: argparse.Namespace) -> int:
    from medallion.bundle.cli import cmd_job

    return cmd_job(args)


COMMANDS = {
    "generate": _cmd_generate,
    "run": _cmd_run,
    "changes": _cmd_changes,
    "show": _cmd_show,
    "job": _cmd_job,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``medallion`` console script; returns the exit code."""
    from medallion.ops.cli import OPS_COMMANDS

    COMMANDS.update(OPS_COMMANDS)
    args = build_parser().parse_args(argv)
    _configure_logging(args.verbose)
    try:
        return COMMANDS[args.command](args)
    except (ConfigError, OSError) as error:
        print(f"medallion {args.command}: error: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # noqa: BLE001 - the top level turns any failure into a message
        from medallion.streams.runner import PipelineError, error_summary

        if args.verbose or not isinstance(error, PipelineError):
            log.debug("failure", exc_info=True)
        message = (
            str(error)
            if isinstance(error, PipelineError)
            else f"{type(error).__name__}: {error_summary(error)}"
        )
        print(f"medallion {args.command}: failed: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
