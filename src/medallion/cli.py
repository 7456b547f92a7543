"""The ``medallion`` command line: thin argument parsing over the package's modules."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from medallion import __version__, console
from medallion.argtypes import AT_LEAST_ONE, COUNT, POSITIVE_SECONDS, SHARE
from medallion.bundle.cli import add_job_parser, cmd_job
from medallion.cli_arguments import (
    add_lake_argument,
    add_landing_argument,
    add_output_argument,
    add_pipeline_argument,
    add_settings_arguments,
    add_topic_arguments,
)
from medallion.cli_parser import CommandParser, flags_anywhere
from medallion.config import Config
from medallion.data_commands import cmd_changes, cmd_generate, cmd_show
from medallion.declarations import LAYERS
from medallion.errors import ConfigError, PipelineError
from medallion.ops.cli import OPS_COMMANDS, add_ops_parsers
from medallion.pipelines import all_datasets
from medallion.run_command import add_delta_source_arguments, cmd_run
from medallion.run_options import flag_help, run_option
from medallion.session import jvm_log

log = logging.getLogger("medallion")


def _configure_logging(verbose: bool) -> None:
    console.configure(verbose)
    if verbose:  # the JVM's output on the console too, not only in its log file
        os.environ["MEDALLION_VERBOSE"] = "1"


DESCRIPTION = "medallion: a streaming lakehouse on Delta Lake (bronze, silver and gold)."
EXAMPLES = """examples:
  medallion generate --landing build/demo/landing --records 5000
  medallion run --landing build/demo/landing --lake build/demo/lake
  medallion run --landing build/demo/landing --lake build/demo/lake --stream
  medallion status --lake build/demo/lake
  medallion show --lake build/demo/lake --layer gold --pipeline retail
  medallion job run medallion_pipeline

MEDALLION_LAKE and MEDALLION_LANDING give --lake and --landing their defaults.
Each command's --help has more."""


VERBOSE = (
    ("-v", "--verbose"),
    {"action": "store_true", "help": "show every log line and the JVM's output"},
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = CommandParser(
        prog="medallion",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        anywhere=[flags_anywhere(VERBOSE)],  # -v after a subcommand too
    )
    parser.add_argument("--version", action="version", version=f"medallion {__version__}")
    parser.add_argument(*VERBOSE[0], **VERBOSE[1])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    gen = sub.add_parser(
        "generate",
        help="write synthetic input files with faults",
        epilog="example:\n  medallion generate --landing build/demo/landing --records 5000 "
        "--pipeline banking",
    )
    add_landing_argument(gen, required=True)
    gen.add_argument(
        "--records",
        type=AT_LEAST_ONE,
        default=1000,
        help="records of each pipeline's main dataset, unless its own flag below says",
    )
    for dataset in all_datasets():  # --events, --customers, --transactions, ...
        gen.add_argument(
            f"--{dataset.replace('_', '-')}",
            dest=f"size_{dataset}",
            type=COUNT,
            metavar="N",
            help=f"records of {dataset.replace('_', ' ')} (default: --records for a pipeline's "
            "main dataset, else the pipeline's choice)",
        )
    add_pipeline_argument(gen, default="every pipeline with a generator")
    gen.add_argument("--files", type=AT_LEAST_ONE, default=4, help="files per dataset")
    gen.add_argument("--seed", type=int, default=42, help="the same seed writes the same files")
    gen.add_argument("--duplicate-rate", type=SHARE, default=0.05, help="share of records re-sent")
    gen.add_argument(
        "--late-rate", type=SHARE, default=0.05, help="share of records that arrive late"
    )
    gen.add_argument(
        "--invalid-rate", type=SHARE, default=0.04, help="share of records the contract refuses"
    )
    gen.add_argument(
        "--malformed-rate", type=SHARE, default=0.02, help="share of lines that are not JSON"
    )

    run = sub.add_parser(
        "run",
        help="process landed input through bronze, silver and gold",
        epilog="examples:\n"
        "  medallion run --landing build/demo/landing --lake build/demo/lake\n"
        "  medallion run --lake build/lake --source kafka --kafka-bootstrap 127.0.0.1:9092\n"
        "  medallion run --landing in --lake lake --pipeline banking "
        "--set fraud_risk_score_above=0.9",
    )
    add_landing_argument(run, help=f"{flag_help('--landing')} (with --source files)")
    add_lake_argument(run, help=flag_help("--lake"))
    run.add_argument(
        "--stream",
        action="store_true",
        help="keep running until SIGINT/SIGTERM (processing_time; default: available_now)",
    )
    run.add_argument(
        "--no-live",
        action="store_true",
        help="with --stream on a terminal: print lines instead of the live table of streams",
    )
    run.add_argument(
        "--interval",
        type=POSITIVE_SECONDS,
        default=Config.trigger_interval_seconds,
        help=flag_help("--interval"),
    )
    run.add_argument(
        "--max-files-per-trigger",
        type=AT_LEAST_ONE,
        metavar="N",
        help=flag_help("--max-files-per-trigger"),
    )
    run.add_argument(
        "--skip-missing-files", action="store_true", help=flag_help("--skip-missing-files")
    )
    run.add_argument(
        "--source",
        choices=("files", "kafka"),
        default=run_option("source").default,
        help=flag_help("--source"),
    )
    kafka = run.add_argument_group("Kafka source", "credentials: see docs/kafka.md")
    kafka.add_argument(
        "--kafka-bootstrap", metavar="HOST:PORT[,...]", help=flag_help("--kafka-bootstrap")
    )
    add_topic_arguments(kafka)
    kafka.add_argument(
        "--starting-offsets",
        default=run_option("starting_offsets").default,
        help=flag_help("--starting-offsets"),
    )
    kafka.add_argument(
        "--max-offsets-per-trigger",
        type=AT_LEAST_ONE,
        metavar="N",
        help=flag_help("--max-offsets-per-trigger"),
    )
    kafka.add_argument("--kafka-secret-scope", help=flag_help("--kafka-secret-scope"))
    kafka.add_argument(
        "--kafka-accept-data-loss",
        action="store_true",
        help="when records not read yet are gone (retention, a recreated topic), read what "
        "remains instead of stopping, and record the lost offsets in <lake>/_system/data_gaps "
        "(kafka_fail_on_data_loss=false)",
    )
    add_delta_source_arguments(run)
    add_pipeline_argument(run, default="every pipeline with input")
    add_output_argument(run)
    add_settings_arguments(run)

    changes = sub.add_parser(
        "changes",
        help="read a table's Change Data Feed (batch)",
        epilog="example:\n  medallion changes --lake build/demo/lake --table silver/customers "
        "--from-version 1",
    )
    add_lake_argument(changes)
    changes.add_argument(
        "--table",
        help="for example silver/customers (default: the one table with a change data feed "
        "among the pipelines' tables in the lake)",
    )
    add_pipeline_argument(changes)
    start = changes.add_mutually_exclusive_group(required=True)
    start.add_argument("--from-version", type=COUNT, metavar="N", help="first table version")
    start.add_argument(
        "--from-timestamp", metavar="T", help="ISO-8601, for example 2026-11-20T10:00:00Z"
    )
    changes.add_argument(
        "--to-version", type=COUNT, metavar="M", help="last table version (default: the latest)"
    )
    changes.add_argument("--to-timestamp", metavar="T", help="ISO-8601 (default: now)")
    changes.add_argument("--rows", type=AT_LEAST_ONE, default=50, help="rows to print")
    add_output_argument(changes)

    show = sub.add_parser(
        "show",
        help="print tables of the lake",
        epilog="example:\n  medallion show --lake build/demo/lake --layer silver --rows 5",
    )
    add_lake_argument(show)
    show.add_argument("--layer", choices=LAYERS, default="gold", help="which tables")
    show.add_argument("--rows", type=AT_LEAST_ONE, default=20, help="rows per table")
    add_pipeline_argument(show)
    add_output_argument(show)

    add_job_parser(sub)  # medallion job list | run: the bundle's jobs (docs/bundle.md)

    add_ops_parsers(sub)  # maintain | status | reset | quarantine | pipelines (docs/operations.md)
    return parser


COMMANDS = {
    "generate": cmd_generate,
    "run": cmd_run,
    "changes": cmd_changes,
    "show": cmd_show,
    "job": cmd_job,
    **OPS_COMMANDS,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``medallion`` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    _configure_logging(args.verbose)
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        # Ctrl-C: the runner has stopped its queries on the way out; each stream resumes from
        # its checkpoint, its batch in flight replayed.
        console.error(
            f"medallion {args.command}: interrupted; a rerun resumes from the checkpoints"
        )
        return 130
    except (ConfigError, OSError) as error:
        console.error(f"medallion {args.command}: error: {error}")
        return 2
    except Exception as error:  # noqa: BLE001 - the top level turns any failure into a message
        # deferred: loads pyspark
        from medallion.streams.stream_errors import error_summary

        # Its traceback in the log file and with -v; the console's one line says the rest.
        console.detail(log, "medallion %s failed", args.command)
        message = (
            str(error)
            if isinstance(error, PipelineError)
            else f"{type(error).__name__}: {error_summary(error)}"
        )

        where = f" (the JVM's log: {jvm_log()})" if jvm_log() is not None else ""
        console.error(f"medallion {args.command}: failed: {message}{where}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
