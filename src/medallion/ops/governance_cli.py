"""The governance subcommands of ``medallion``: ``quarantine`` (summary, replay) and ``erase``
(docs/governance.md). medallion/ops/cli.py adds them to the ``medallion`` parser."""

from __future__ import annotations

import argparse
import sys

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
from medallion.errors import ConfigError
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
        epilog="examples:\n  medallion erase --lake build/demo/lake --subject c00042 --dry-run\n"
        "  medallion erase --lake build/demo/lake --subject - --request < request.txt\n"
        "  medallion erase --lake build/demo/lake --pending\n"
        "needs the erasure key in MEDALLION_ERASURE_KEY (docs/governance.md)",
    )
    add_lake_argument(erase)
    which = erase.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--subject",
        metavar="ID",
        help="the id of the person to erase; - reads it from standard input (kept out of the "
        "shell's history and the process list)",
    )
    which.add_argument(
        "--pending",
        action="store_true",
        help="carry out the erasure requests not carried out yet (what the bundle's "
        "medallion_erase job does)",
    )
    erase.add_argument(
        "--request",
        action="store_true",
        help="with --subject: record a request (the id's keyed hash, never the id) for "
        "--pending or the bundle's job to carry out, and erase nothing now",
    )
    erase.add_argument(
        "--request-id",
        metavar="R",
        help="with --pending: only the request R (as --request printed it)",
    )
    erase.add_argument(
        "--suppress-if-absent",
        action="store_true",
        help="when no table holds the id yet, record it as a suppression alone (its lines "
        "that land later are dropped) instead of refusing",
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
    from medallion.ops.erasure_requests import erase_requested, request_erasure
    from medallion.tables import in_lake

    if args.request and args.pending:
        raise ConfigError("--request records a request for --subject; --pending carries them out")
    if args.request_id and not args.pending:
        raise ConfigError("--request-id picks one of the pending requests: give --pending too")
    subject = sys.stdin.readline().strip() if args.subject == "-" else args.subject
    config = lake_config(args)
    spark = get_spark()
    config = in_lake(spark, config)
    if args.request:
        request_id = request_erasure(spark, config, subject, args.suppress_if_absent)
        if args.output == "json":
            print_json({"request_id": request_id})
        else:
            print(
                f"erasure request {request_id} recorded (the id's keyed hash, not the id): "
                "the bundle's medallion_erase job, or medallion erase --pending, carries it out"
            )
        return 0
    if args.pending:
        results = erase_requested(spark, config, args.request_id, args.dry_run, args.vacuum)
    else:
        results = [
            erase_subject(
                spark, config, subject, args.dry_run, args.vacuum, args.suppress_if_absent
            )
        ]
    if args.output == "json":
        print_json([r.as_json() for r in results] if args.pending else results[0].as_json())
    elif args.pending and not results:
        print("no pending erasure request")
    else:
        print("\n".join(r.describe(args.dry_run) for r in results))
    return 0


GOVERNANCE_COMMANDS = {"quarantine": cmd_quarantine, "erase": cmd_erase}
