"""The options of ``medallion run`` that become a Config's source settings: the Delta source
flags, the carried columns and the Kafka topics."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence

from medallion.argtypes import AT_LEAST_ONE, byte_size, starting_version
from medallion.config import ConfigError, DeltaSourceOptions
from medallion.task_params import TOPIC_SUFFIX

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
        help="where a new checkpoint starts reading its source table (no initial snapshot)",
    )
    start.add_argument(
        "--starting-timestamp",
        metavar="TIMESTAMP",
        help="start a new checkpoint at the first commit at or after this time (ISO-8601)",
    )
    delta.add_argument(
        "--delta-max-files-per-trigger",
        type=AT_LEAST_ONE,
        metavar="N",
        help="source files per micro-batch (Delta's default: 1000)",
    )
    delta.add_argument(
        "--delta-max-bytes-per-trigger",
        type=byte_size,
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


def carried_columns(
    arguments: Sequence[str], pipeline_names: Sequence[str]
) -> dict[str, list[str]]:
    """The fields ``--carry-column [TABLE:]NAME`` carries, by table key; without a table, into
    the one table of the pipelines run that takes carried columns."""
    from medallion.pipelines import pipelines

    carried: dict[str, list[str]] = {}
    for argument in arguments:
        key, _, name = argument.rpartition(":")
        if not key:
            try:
                chosen = pipelines(pipeline_names)
            except KeyError as error:
                raise ConfigError(str(error.args[0])) from None
            takers = [t.key for p in chosen for t in p.tables if t.carries_input_fields]
            if len(takers) != 1:
                raise ConfigError(
                    f"--carry-column {argument}: name the table, TABLE:NAME "
                    f"(tables that take carried columns: {', '.join(takers) or 'none'})"
                )
            key = takers[0]
        carried.setdefault(key, []).append(name)
    return carried


def topic_arguments(args: argparse.Namespace) -> dict[str, str]:
    """The topics ``--<dataset>-topic`` names, by dataset."""
    from medallion.pipelines import all_datasets

    return {dataset: getattr(args, f"{dataset}{TOPIC_SUFFIX}") for dataset in all_datasets()}
