"""The operations subcommands of ``medallion``: ``maintain``, ``status``, ``reset`` and
``pipelines``.

medallion/cli.py adds them with :func:`add_ops_parsers` and dispatches through
:data:`OPS_COMMANDS`; docs/operations.md describes them.
"""

from __future__ import annotations

import argparse
import os
import sys

from medallion.config import Config, ConfigError


def _hours(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("use a number of hours") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be zero or more")
    return value


def add_ops_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``maintain``, ``status``, ``reset`` and ``pipelines`` to the ``medallion`` parser."""
    from medallion.ops.maintain import DEFAULT_RETENTION_HOURS

    maintain = sub.add_parser("maintain", help="compact (OPTIMIZE, Z-order) and safely VACUUM")
    maintain.add_argument(
        "--lake", required=True, help="folder of the Delta tables and checkpoints"
    )
    maintain.add_argument(
        "--table",
        action="append",
        help="a table key such as silver/events (repeatable; default all)",
    )
    maintain.add_argument(
        "--vacuum-retention",
        type=_hours,
        default=DEFAULT_RETENTION_HOURS,
        metavar="HOURS",
        help="keep files removed less than HOURS ago (default 168; unsafe values are refused)",
    )
    add_pipeline_argument(maintain)
    maintain.add_argument("--no-vacuum", action="store_true", help="compact only")
    maintain.add_argument("--no-optimize", action="store_true", help="VACUUM only")
    maintain.add_argument(
        "--max-stream-downtime",
        type=_hours,
        default=None,
        metavar="HOURS",
        help="the longest a stream may stay stopped (default 72); the retention must exceed it",
    )

    status = sub.add_parser("status", help="tables, streams, throughput and lag")
    status.add_argument("--lake", required=True)
    status.add_argument("--landing", help="landing folder, to count files not yet ingested")
    status.add_argument("--json", action="store_true", help="print JSON")
    add_pipeline_argument(status)

    reset = sub.add_parser("reset", help="delete a layer and everything downstream, to rebuild")
    reset.add_argument("--lake", required=True)
    reset.add_argument("--layer", required=True, choices=("bronze", "silver", "gold"))
    reset.add_argument("--table", help="only this table of the layer (and what is downstream)")
    reset.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    add_pipeline_argument(reset)

    listing = sub.add_parser("pipelines", help="list the pipelines, with their tables and flows")
    listing.add_argument(
        "--mermaid", action="store_true", help="print their lineage as a Mermaid flowchart"
    )


def add_pipeline_argument(parser: argparse.ArgumentParser, default: str = "all") -> None:
    """``--pipeline NAME`` (repeatable): the pipelines a command acts on."""
    parser.add_argument(
        "--pipeline",
        action="append",
        default=[],
        metavar="NAME",
        help=f"act on this pipeline only (repeatable; default: {default}; `medallion "
        "pipelines` lists them)",
    )


def _lake_config(args: argparse.Namespace, **changes: object) -> Config:
    lake = os.path.abspath(args.lake)
    landing = os.path.abspath(getattr(args, "landing", None) or lake)
    pipelines = tuple(getattr(args, "pipeline", None) or ())
    config = Config(landing=landing, lake=lake, pipelines=pipelines, **changes)  # type: ignore[arg-type]
    config.declared_pipelines()  # an unknown name is an error before Spark starts
    return config


def cmd_maintain(args: argparse.Namespace) -> int:
    from medallion.ops.maintain import maintain, render
    from medallion.session import get_spark

    changes = {}
    if args.max_stream_downtime is not None:
        changes["max_stream_downtime_hours"] = args.max_stream_downtime
    config = _lake_config(args, **changes)
    if not os.path.isdir(config.lake):
        raise ConfigError(f"no lake at {config.lake}")
    results = maintain(
        get_spark(),
        config,
        tables=args.table or (),
        vacuum_retention_hours=None if args.no_vacuum else args.vacuum_retention,
        run_optimize=not args.no_optimize,
    )
    print(render(results))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from medallion.ops.status import lake_status, render_status, status_json
    from medallion.session import get_spark
    from medallion.tables import in_lake

    config = _lake_config(args)
    if not os.path.isdir(config.lake):
        raise ConfigError(f"no lake at {config.lake}")
    landing = os.path.abspath(args.landing) if args.landing else None
    spark = get_spark()
    status = lake_status(spark, in_lake(spark, config), landing)
    print(status_json(status) if args.json else render_status(status))
    return 0


def cmd_reset(args: argparse.Namespace) -> int:
    from medallion.ops.reset import execute_reset, plan_reset
    from medallion.session import get_spark
    from medallion.tables import in_lake

    config = _lake_config(args)
    if not os.path.isdir(config.lake):
        raise ConfigError(f"no lake at {config.lake}")
    spark = get_spark()
    plan = plan_reset(in_lake(spark, config), args.layer, args.table)
    print(f"medallion reset will delete, in {config.lake}:\n{plan.describe()}")
    if not args.yes:
        if not sys.stdin.isatty():
            raise ConfigError("not confirmed: pass --yes to reset without a terminal")
        answer = input("Stop the pipeline first. Type 'yes' to delete all of the above: ")
        if answer.strip().lower() != "yes":
            print("nothing deleted")
            return 1
    execute_reset(spark, config, plan)
    print("done: the next `medallion run` rebuilds these from the layer above")
    return 0


def cmd_pipelines(args: argparse.Namespace) -> int:
    from medallion.ops.lineage import mermaid
    from medallion.pipelines import pipelines

    if args.mermaid:
        print(mermaid(pipelines()), end="")
        return 0
    for pipeline in pipelines():
        print(f"{pipeline.name}")
        print(f"  tables: {', '.join(t.key for t in pipeline.tables)}")
        for flow in pipeline.flows:
            print(f"  flow {flow.name} ({flow.layer}): {flow.reads} -> {', '.join(flow.writes)}")
        for setting in pipeline.settings:
            print(f"  setting {setting.name} = {setting.default}: {setting.help}")
    return 0


OPS_COMMANDS = {
    "maintain": cmd_maintain,
    "status": cmd_status,
    "reset": cmd_reset,
    "pipelines": cmd_pipelines,
}
