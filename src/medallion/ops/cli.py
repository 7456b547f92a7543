"""The operations subcommands of ``medallion``: ``maintain``, ``status``, ``reset`` and
``pipelines``, with ``quarantine`` and ``erase`` from ops/governance_cli.py.

medallion/cli.py adds them with :func:`add_ops_parsers` and dispatches through
:data:`OPS_COMMANDS`; docs/operations.md and docs/governance.md describe them.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import asdict

from medallion.argtypes import (
    COUNT,
    HOURS,
    PORT,
    POSITIVE_MINUTES,
    POSITIVE_SECONDS,
)
from medallion.cli_arguments import (
    LAKE_VARIABLE,
    add_lake_argument,
    add_landing_argument,
    add_output_argument,
    add_pipeline_argument,
    add_topic_arguments,
    lake_config,
    print_json,
)
from medallion.console import error, show
from medallion.declarations import LAYERS
from medallion.deployment import tables_of
from medallion.errors import ConfigError
from medallion.ops.dashboard import serve
from medallion.ops.doctor import render, run_checks
from medallion.ops.governance_cli import GOVERNANCE_COMMANDS, add_governance_parsers
from medallion.ops.lineage import mermaid
from medallion.pipelines import all_datasets, pipelines
from medallion.run_options import flag_help
from medallion.session import get_spark, local_packages, packages_for
from medallion.source_options import KafkaSourceOptions
from medallion.task_params import TOPIC_SUFFIX

# The exit codes of ``status`` beyond 0 (2 is a bad argument, as for every command): a stream
# is behind (``--max-lag``, ``--max-age``); else, with ``--max-lag``, a stream's lag is unknown.
EXIT_BEHIND = 1
EXIT_LAG_UNKNOWN = 3


def add_ops_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``maintain``, ``status``, ``reset``, ``quarantine``, ``erase`` and ``pipelines`` to
    the ``medallion`` parser."""
    # deferred: loads pyspark
    from medallion.ops.maintain import DEFAULT_RETENTION_HOURS

    maintain = sub.add_parser(
        "maintain",
        help="compact (OPTIMIZE, Z-order) and safely VACUUM",
        epilog="example:\n  medallion maintain --lake build/demo/lake --table silver/events",
    )
    add_lake_argument(maintain)
    maintain.add_argument(
        "--table",
        action="append",
        help="a table key such as silver/events (repeatable; default all)",
    )
    maintain.add_argument(
        "--vacuum-retention",
        type=HOURS,
        default=DEFAULT_RETENTION_HOURS,
        metavar="HOURS",
        help="keep files removed less than HOURS ago (unsafe values are refused)",
    )
    add_pipeline_argument(maintain)
    add_output_argument(maintain)
    maintain.add_argument("--no-vacuum", action="store_true", help="compact only")
    maintain.add_argument("--no-optimize", action="store_true", help="VACUUM only")
    maintain.add_argument(
        "--max-stream-downtime",
        type=HOURS,
        default=None,
        metavar="HOURS",
        help="the longest a stream may stay stopped (default: 72); the retention must exceed it",
    )

    status = sub.add_parser(
        "status",
        help="tables, streams, throughput and lag",
        epilog="examples:\n  medallion status --lake build/demo/lake --landing build/demo/landing\n"
        "  medallion status --lake build/lake --kafka-bootstrap 127.0.0.1:9092 --max-lag 100000",
    )
    add_lake_argument(status)
    add_landing_argument(status, help="landing folder, to count files not yet ingested")
    add_output_argument(status)
    status.add_argument(
        "--json", dest="output", action="store_const", const="json", help="as --output json"
    )
    status.add_argument(
        "--max-lag",
        type=COUNT,
        metavar="N",
        help=f"exit {EXIT_BEHIND} when a stream has more than N landed files, Kafka records or "
        f"source versions unread; else exit {EXIT_LAG_UNKNOWN} when a stream's lag is unknown",
    )
    status.add_argument(
        "--max-age",
        type=POSITIVE_MINUTES,
        metavar="MINUTES",
        help="exit 1 when a started stream's last batch with data is older than MINUTES",
    )
    add_pipeline_argument(status)
    kafka = status.add_argument_group(
        "Kafka source", "to count the records Kafka streams have not read (docs/kafka.md)"
    )
    kafka.add_argument(
        "--kafka-bootstrap", metavar="HOST:PORT[,...]", help=flag_help("--kafka-bootstrap")
    )
    kafka.add_argument("--kafka-secret-scope", help=flag_help("--kafka-secret-scope"))
    add_topic_arguments(kafka, " (of a stream not started yet)")

    reset = sub.add_parser(
        "reset",
        help="delete a layer and everything downstream, to rebuild",
        epilog="example:\n  medallion reset --lake build/demo/lake --layer silver --yes",
    )
    add_lake_argument(reset)
    reset.add_argument(
        "--layer",
        required=True,
        choices=LAYERS,
        help="the layer to rebuild (what is downstream of it goes too)",
    )
    reset.add_argument("--table", help="only this table of the layer (and what is downstream)")
    reset.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    add_pipeline_argument(reset)

    add_governance_parsers(sub)

    add_doctor_and_shell(sub)
    listing = sub.add_parser(
        "pipelines",
        help="list the pipelines, with their tables and flows",
        epilog="examples:\n  medallion pipelines\n  medallion pipelines --mermaid",
    )
    listing.add_argument(
        "--mermaid", action="store_true", help="print their lineage as a Mermaid flowchart"
    )


def add_doctor_and_shell(sub: argparse._SubParsersAction) -> None:
    """``doctor`` (what a run needs), ``shell`` (IPython with the lake's tables) and
    ``dashboard`` (the lake's charts in a browser)."""
    doctor = sub.add_parser(
        "doctor",
        help="check what a run needs (Java, jars, lake, bundle, Databricks profile)",
        epilog="example:\n  medallion doctor --lake build/demo/lake",
    )
    doctor.add_argument(
        "--lake",
        default=os.environ.get(LAKE_VARIABLE) or "build/demo/lake",
        metavar="DIR",
        help=f"the lake to check write access to (${LAKE_VARIABLE})",
    )
    shell = sub.add_parser(
        "shell",
        help="IPython with `spark` and every table of the lake registered by name",
        epilog="example:\n  medallion shell --lake build/demo/lake\n"
        "  In [1]: spark.table('medallion.gold_hourly_product_metrics').show()",
    )
    add_lake_argument(shell)
    dashboard = sub.add_parser(
        "dashboard",
        help="a live page of the lake's charts on 127.0.0.1 (gold, quarantine, stream health)",
        epilog="example:\n  medallion dashboard --lake build/demo/lake --port 8050",
    )
    add_lake_argument(dashboard)
    dashboard.add_argument("--port", type=PORT, default=8050, help="the port on 127.0.0.1")
    dashboard.add_argument(
        "--refresh",
        type=POSITIVE_SECONDS,
        default=5.0,
        metavar="SECONDS",
        help="seconds between two reads of the lake (the page follows a --stream run)",
    )


def cmd_doctor(args: argparse.Namespace) -> int:
    checks = run_checks(args.lake, local_packages())
    show(render(checks))
    return 1 if any(check.ok is False for check in checks) else 0


def cmd_dashboard(args: argparse.Namespace) -> int:
    config = lake_config(args)
    serve(config.lake, args.port, args.refresh)
    return 0


def cmd_shell(args: argparse.Namespace) -> int:
    # deferred: loads IPython, pyspark
    import IPython

    from medallion.tables import register_tables, table_exists

    config = lake_config(args)
    spark = get_spark()
    register_tables(spark, config)
    names = [t.qualified_name.replace("`", "") for t in tables_of(config) if table_exists(spark, t)]
    print(
        f"medallion shell: `spark` (Spark {spark.version}) and `config` for {config.lake}; "
        f"tables: {', '.join(names) or 'none yet'}"
    )
    IPython.start_ipython(
        argv=["--quick", "--no-banner"], user_ns={"spark": spark, "config": config}
    )
    return 0


def cmd_maintain(args: argparse.Namespace) -> int:
    # deferred: loads pyspark
    from medallion.ops.maintain import maintain, render

    changes = {}
    if args.max_stream_downtime is not None:
        changes["max_stream_downtime_hours"] = args.max_stream_downtime
    config = lake_config(args, **changes)
    results = maintain(
        get_spark(),
        config,
        tables=args.table or (),
        vacuum_retention_hours=None if args.no_vacuum else args.vacuum_retention,
        run_optimize=not args.no_optimize,
    )
    if args.output == "json":
        print_json([asdict(r) for r in results])
    else:
        show(render(results))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    # deferred: loads pyspark
    from medallion.ops.status import behind, lag_unknown, lake_status, render_status, status_json
    from medallion.tables import in_lake

    config = lake_config(args, **_kafka_changes(args))
    landing = os.path.abspath(args.landing) if args.landing else None
    spark = get_spark(packages=packages_for(config))
    status = lake_status(spark, in_lake(spark, config), landing)
    problems = behind(status, args.max_lag, args.max_age)
    unknown = lag_unknown(status)
    if args.output == "json":
        print(status_json({**status, "behind": problems, "lag_unknown": unknown}))
    else:
        show(render_status(status))
    for problem in problems:
        error(f"medallion status: behind: {problem}")
    if args.max_lag is None:
        return EXIT_BEHIND if problems else 0
    for why in unknown:
        error(f"medallion status: unknown: {why}")
    return EXIT_BEHIND if problems else EXIT_LAG_UNKNOWN if unknown else 0


def _kafka_changes(args: argparse.Namespace) -> dict[str, object]:
    """The Config changes of ``status --kafka-bootstrap``: the Kafka source, as a run has it."""
    if not args.kafka_bootstrap:
        return {}
    topics = {dataset: getattr(args, f"{dataset}{TOPIC_SUFFIX}") for dataset in all_datasets()}
    kafka = KafkaSourceOptions(
        bootstrap_servers=args.kafka_bootstrap,
        topics=topics,
        secret_scope=args.kafka_secret_scope,
    )
    return {"source": "kafka", "kafka": kafka}


def cmd_reset(args: argparse.Namespace) -> int:
    # deferred: loads pyspark
    from medallion.ops.reset import execute_reset, plan_reset
    from medallion.tables import in_lake

    config = lake_config(args)
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
    "doctor": cmd_doctor,
    "shell": cmd_shell,
    "dashboard": cmd_dashboard,
    "maintain": cmd_maintain,
    "status": cmd_status,
    "reset": cmd_reset,
    **GOVERNANCE_COMMANDS,
    "pipelines": cmd_pipelines,
}
