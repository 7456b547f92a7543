"""The commands that write input or read tables: ``generate``, ``changes`` and ``show``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from medallion import console
from medallion.bundle.workspace import generate_to_volume, needs_files_api
from medallion.cli_arguments import lake_config, print_json
from medallion.config import Config
from medallion.console import plural
from medallion.deployment import pipelines_of, tables_of
from medallion.errors import ConfigError
from medallion.generate import FaultRates
from medallion.pipelines import all_datasets, declared_table, generate_input
from medallion.session import get_spark


def cmd_generate(args: argparse.Namespace) -> int:
    """``medallion generate``: input files with faults, for the chosen pipelines."""
    faults = FaultRates(
        duplicate=args.duplicate_rate,
        late=args.late_rate,
        invalid=args.invalid_rate,
        malformed=args.malformed_rate,
    )
    sizes = {d: getattr(args, f"size_{d}") for d in all_datasets()}
    options = {
        **{dataset: size for dataset, size in sizes.items() if size is not None},
        "records": args.records,
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


def cmd_changes(args: argparse.Namespace) -> int:
    """``medallion changes``: a table's change data feed, between versions or times."""
    # deferred: loads pyspark
    from medallion.changes import read_changes

    config = lake_config(args)
    # A history's or a ledger's feed is read only when named.
    feeds = [
        t.key
        for p in pipelines_of(config)
        for t in p.tables
        if t.change_data_feed and not t.feed_read_by_name_only
    ]
    spark = get_spark()
    changes = read_changes(
        spark,
        config,
        args.table or _only_change_feed(spark, config, feeds),
        from_version=args.from_version,
        to_version=args.to_version,
        from_timestamp=args.from_timestamp,
        to_timestamp=args.to_timestamp,
    )
    ordered = changes.orderBy("_commit_version", "_change_type")
    count = ordered.count()
    if args.output == "json":
        rows = [row.asDict(recursive=True) for row in ordered.limit(args.rows).collect()]
        print_json({"changes": count, "rows": rows})
        return 0
    print(f"{count} changes")
    console.show(console.rows_table(ordered.columns, ordered.limit(args.rows).collect()))
    return 0


def _only_change_feed(spark: object, config: Config, keys: Sequence[str]) -> str:
    """The one table of ``keys`` (tables with a change data feed), preferring those the lake
    holds; :class:`ConfigError` when that leaves none or several."""
    # deferred: loads pyspark
    from medallion.tables import table_exists

    held = [k for k in keys if table_exists(spark, config.table(k))] if len(keys) > 1 else keys
    if len(held) != 1:
        raise ConfigError(
            f"name the table with --table: tables with a change data feed are "
            f"{', '.join(keys) or 'none'}"
        )
    return held[0]


def cmd_show(args: argparse.Namespace) -> int:
    """``medallion show``: the first rows of a layer's tables, and how many they hold."""
    # deferred: loads pyspark
    from medallion.explore import display_order
    from medallion.tables import read_table, table_exists

    config = lake_config(args)
    spark = get_spark()
    shown = []
    for table in tables_of(config):
        if table.layer != args.layer or not table_exists(spark, table):
            continue
        df = read_table(spark, table)
        ordered = df.orderBy(*display_order(declared_table(table.key), df.columns))
        if args.output == "json":
            rows = [row.asDict(recursive=True) for row in ordered.limit(args.rows).collect()]
            shown.append({"table": table.key, "rows": df.count(), "first_rows": rows})
            continue
        print(f"\n== {table.key} ({plural(df.count(), 'row')})")
        console.show(console.rows_table(ordered.columns, ordered.limit(args.rows).collect()))
    if args.output == "json":
        print_json(shown)
    return 0
