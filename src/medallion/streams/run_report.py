"""What a run did, table by table: rows in, rows out, quarantined and total, read from the
streams' progress and the tables' Delta logs."""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery
from rich.table import Table

from medallion.config import Config
from medallion.console import plain
from medallion.console import table as summary_table
from medallion.delta_log import commit_infos
from medallion.deployment import flows_of, tables_of
from medallion.parallel import in_parallel
from medallion.streams.flows import Flow, fusion_head
from medallion.tables import history, row_count, table_version


@dataclass
class TableSummary:
    """What one run did to one table."""

    table: str
    rows_in: int = 0
    rows_out: int = 0
    quarantined: int = 0
    total_rows: int = 0


@dataclass
class RunReport:
    """Per-table summary and per-stream batch counts of one run."""

    tables: list[TableSummary] = field(default_factory=list)
    batches: dict[str, int] = field(default_factory=dict)
    # Wall seconds of each flow of an available-now run, from its start to its end.
    flow_seconds: dict[str, float] = field(default_factory=dict)
    # Wall seconds of each stage inside fused batches (bronze, silver, gold of events).
    stage_seconds: dict[str, float] = field(default_factory=dict)
    # The tables whose small files the run compacted (medallion/compaction.py).
    compacted: list[str] = field(default_factory=list)

    def table(self, key: str) -> TableSummary:
        """The summary of one table."""
        return next(t for t in self.tables if t.table == key)

    def __str__(self) -> str:
        """The summary table as plain text (what a notebook prints)."""
        return plain(self.render())

    def render(self) -> Table:
        """The summary as a table (``console.show`` prints it, ``console.plain`` as text)."""
        caption = f"compacted small files: {', '.join(self.compacted)}" if self.compacted else None
        shown = summary_table("table", *SUMMARY_COUNTS, numeric=SUMMARY_COUNTS, caption=caption)
        for t in self.tables:
            shown.add_row(
                t.table, *(f"{n:,}" for n in (t.rows_in, t.rows_out, t.quarantined, t.total_rows))
            )
        return shown


SUMMARY_COUNTS = ("rows in", "rows out", "quarantined", "total rows")


def table_versions(spark: SparkSession, config: Config) -> dict[str, int]:
    """The current version of every table (they exist: the run made sure), from the
    Delta logs' listings where the tables are paths."""
    tables = tables_of(config)
    latest = in_parallel(lambda table: table_version(spark, table) or 0, tables, "versions")
    return {table.key: version for table, version in zip(tables, latest, strict=True)}


def rows_written(spark: SparkSession, config: Config, key: str, since: int) -> int:
    """Rows inserted, updated or deleted in a table by the commits after version ``since``:
    their ``commitInfo`` read from the log, or (a catalog table) the history's newest rows."""
    table = config.table(key)
    try:
        commits = commit_infos(spark, table, since)
    except LookupError:
        new_commits = (table_version(spark, table) or 0) - since
        if new_commits <= 0:
            return 0
        rows = history(spark, table, new_commits).collect()
        commits = [row.asDict() for row in rows if row["version"] > since]
    total = 0
    for commit in commits:
        metrics = commit.get("operationMetrics") or {}
        if commit.get("operation") == "MERGE":
            changed = ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted")
            total += sum(int(metrics.get(name, 0)) for name in changed)
        elif commit.get("operation") in ("WRITE", "STREAMING UPDATE"):
            total += int(metrics.get("numOutputRows", 0))
    return total


def summarize(
    spark: SparkSession,
    config: Config,
    before: dict[str, int],
    queries: dict[str, list[StreamingQuery]],
) -> RunReport:
    """The run's report, from ``before`` (table versions) and each flow's queries (more than
    one when a continuous run paused and started them again)."""
    report = RunReport()
    rows_in: dict[str, int] = {}
    for name, started in queries.items():
        progress = [p for query in started for p in query.recentProgress]
        report.batches[name] = len(progress)
        rows_in[name] = sum(p.numInputRows for p in progress)

    def summary(written: tuple[Flow, str]) -> TableSummary:
        flow, key = written
        result = TableSummary(key)
        result.rows_out = rows_written(spark, config, key, before.get(key, -1))
        result.total_rows = row_count(spark, config.table(key))
        return result

    flows = flows_of(config)
    report.tables = in_parallel(
        summary, [(flow, key) for flow in flows for key in flow.writes], "summary"
    )
    written = {key for flow in flows for key in flow.writes}
    for flow in flows:
        # A flow's input counts once, against its main table, not its side outputs. A flow
        # its head carried read what the flow before it wrote in this run.
        main = report.table(flow.writes[0])
        if flow.name in rows_in:
            main.rows_in = rows_in[flow.name]
        elif fusion_head(flow.name) is not None and flow.source.key in written:
            main.rows_in = report.table(flow.source.key).rows_out
        for quarantine in (t for t in flow.outputs if t.quarantine):
            main.quarantined = report.table(quarantine.key).rows_out
    return report
