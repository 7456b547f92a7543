"""The governance subcommands of ``medallion``: ``quarantine`` (summary, replay) and ``erase``
(docs/governance.md). medallion/ops/cli.py adds them to the ``medallion`` parser."""

from __future__ import annotations

import argparse

from medallion.argtypes import point_in_time
from medallion.cli_arguments import (
    add_lake_argument,
    add_output_argument,
    add_pipeline_argument,
    add_settings_arguments,
    carried_columns,
    lake_config,
    print_json,
)
from medallion.config import parse_settings
from medallion.console import show
from medallion.session import get_spark


def add_governance_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``quarantine`` and ``erase`` to the ``medallion`` parser."""
    quarantine = sub.add_parser(
        "quarantine",
        help="what the quarantines hold (summary)",
        epilog="example:\n  medallion quarantine summary --lake build/demo/lake",
    )
    actions = quarantine.add_subparsers(dest="action", required=True, metavar="ACTION")
    summary = actions.add_parser(
        "summary",
        help="records of each quarantine by reason and by day of ingestion",
        epilog="example:\n  medallion quarantine summary --lake build/demo/lake --since 2026-11-01",
    )
    add_lake_argument(summary)
    add_pipeline_argument(summary)
    summary.add_argument(
        "--since",
        type=point_in_time,
        metavar="TIME",
        help="count records ingested at or after TIME (ISO-8601, UTC unless it has a zone)",
    )
    add_output_argument(summary)
    replay = actions.add_parser(
        "replay",
        help="check quarantined records again and promote those that now pass into silver",
        epilog="example:\n  medallion quarantine replay --lake build/demo/lake "
        "--reason-like event_type --set expect.events.event_type_allowed=warn",
    )
    add_lake_argument(replay)
    add_pipeline_argument(replay)
    replay.add_argument(
        "--reason-like",
        metavar="TEXT",
        help="only records whose reason matches TEXT, a SQL LIKE pattern (without %%: any "
        "reason that contains it)",
    )
    replay.add_argument(
        "--since",
        type=point_in_time,
        metavar="TIME",
        help="only records ingested at or after TIME (ISO-8601, UTC unless it has a zone)",
    )
    replay.add_argument(
        "--dry-run", action="store_true", help="count what would be promoted; write nothing"
    )
    add_settings_arguments(replay)
    add_output_argument(replay)

    erase = sub.add_parser(
        "erase",
        help="remove a data subject's rows from every table; gold recomputed without them",
        epilog="example:\n  medallion erase --lake build/demo/lake --subject c00042 --dry-run",
    )
    add_lake_argument(erase)
    erase.add_argument(
        "--subject", required=True, metavar="ID", help="the id of the person to erase"
    )
    add_pipeline_argument(erase, default="every pipeline that declares data subjects")
    erase.add_argument(
        "--dry-run", action="store_true", help="count what would be removed; write nothing"
    )
    erase.add_argument(
        "--vacuum",
        action="store_true",
        help="then VACUUM the tables it touched (maintenance's retention and guard)",
    )
    add_output_argument(erase)


def cmd_quarantine(args: argparse.Namespace) -> int:
    if args.action == "replay":
        return _quarantine_replay(args)
    # deferred: loads pyspark
    from medallion.ops.quarantine import quarantine_summary, render_summary
    from medallion.tables import in_lake

    spark = get_spark()
    summaries = quarantine_summary(spark, in_lake(spark, lake_config(args)), args.since)
    if args.output == "json":
        print_json([s.as_json() for s in summaries])
    else:
        show(render_summary(summaries))
    return 0


def _quarantine_replay(args: argparse.Namespace) -> int:
    # deferred: loads pyspark
    from medallion.ops.replay import render_results, replay_quarantines
    from medallion.tables import in_lake

    config = lake_config(
        args,
        settings=parse_settings(args.settings),
        carried_columns=carried_columns(args.carry_column, args.pipeline),
    )
    spark = get_spark()
    results = replay_quarantines(
        spark, in_lake(spark, config), args.reason_like, args.since, args.dry_run
    )
    if args.output == "json":
        print_json([r.as_json() for r in results])
    else:
        print(render_results(results, args.dry_run))
    return 0


def cmd_erase(args: argparse.Namespace) -> int:
    # deferred: loads pyspark
    from medallion.ops.erase import erase_subject
    from medallion.tables import in_lake

    config = lake_config(args)
    spark = get_spark()
    result = erase_subject(spark, in_lake(spark, config), args.subject, args.dry_run, args.vacuum)
    if args.output == "json":
        print_json(result.as_json())
    else:
        print(result.describe(args.dry_run))
    return 0


GOVERNANCE_COMMANDS = {"quarantine": cmd_quarantine, "erase": cmd_erase}
