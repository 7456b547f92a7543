"""What the quarantines hold: ``medallion quarantine summary`` and its notebook API.

Every pipeline puts the records its contract refuses into a quarantine table, with the
reason (``reason``) and when the record was ingested (``_ingested_at``). The summary counts
them by reason, exactly as the reason was written (every failed rule, joined by ``"; "``),
and by day of ingestion (UTC), table by table (docs/governance.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, timezone

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from rich.console import Group
from rich.padding import Padding
from rich.text import Text

from medallion import console
from medallion.config import Config
from medallion.deployment import tables_of
from medallion.pipelines import declared_table
from medallion.sql_names import TableRef
from medallion.tables import read_table, table_exists

# How many reasons a table shows as text (JSON gives every one).
SHOWN_REASONS = 20


@dataclass(frozen=True)
class ReasonCount:
    reason: str
    records: int


@dataclass(frozen=True)
class DayCount:
    day: date | None  # None: records without an ingestion time
    records: int


@dataclass(frozen=True)
class QuarantineSummary:
    """One quarantine table: its records in all, by reason (most first) and by day."""

    table: str
    records: int
    by_reason: list[ReasonCount] = field(default_factory=list)
    by_day: list[DayCount] = field(default_factory=list)

    def as_json(self) -> dict:
        return asdict(self)


def quarantine_tables(spark: SparkSession, config: Config) -> list[TableRef]:
    """The quarantine tables of ``config``'s pipelines that exist in the lake."""
    return [
        table
        for table in tables_of(config)
        if declared_table(table.key).quarantine and table_exists(spark, table)
    ]


def quarantine_summary(
    spark: SparkSession, config: Config, since: datetime | None = None
) -> list[QuarantineSummary]:
    """Each quarantine table of ``config``'s pipelines: its records by reason and by day of
    ingestion (UTC), counting only records ingested at or after ``since`` when it is given (a
    naive ``since`` is UTC, as :func:`medallion.argtypes.point_in_time` gives it)."""
    return [_summary(spark, table, since) for table in quarantine_tables(spark, config)]


def ingested_since(rows: DataFrame, since: datetime | None) -> DataFrame:
    """The quarantine ``rows`` ingested at or after ``since`` (all when None; naive is UTC)."""
    if since is None:
        return rows
    # Aware, so that PySpark does not read a naive one in this process's time zone.
    if since.tzinfo is None:
        since = since.replace(tzinfo=timezone.utc)
    return rows.where(F.col("_ingested_at") >= F.lit(since))


def _summary(spark: SparkSession, table: TableRef, since: datetime | None) -> QuarantineSummary:
    rows = ingested_since(read_table(spark, table), since)
    # The day in UTC, whatever the session's time zone (a Databricks workspace may set one).
    utc_day = F.to_date(F.to_utc_timestamp("_ingested_at", F.current_timezone()))
    # One job for both counts: each record once by reason and once by day, told apart.
    both = rows.select(
        F.explode(
            F.array(
                F.struct(F.lit("reason").alias("by"), F.col("reason").alias("value")),
                F.struct(
                    F.lit("day").alias("by"),
                    utc_day.cast("string").alias("value"),
                ),
            )
        ).alias("count")
    ).select("count.by", "count.value")
    counted = both.groupBy("by", "value").count().collect()
    reasons = sorted(
        (ReasonCount(r.value, r["count"]) for r in counted if r.by == "reason"),
        key=lambda c: (-c.records, c.reason),
    )
    days = sorted(
        (
            DayCount(date.fromisoformat(r.value) if r.value else None, r["count"])
            for r in counted
            if r.by == "day"
        ),
        key=lambda c: (c.day is None, c.day or date.min),
    )
    return QuarantineSummary(table.key, sum(c.records for c in days), reasons, days)


def render_summary(summaries: Sequence[QuarantineSummary], shown: int = SHOWN_REASONS) -> Group:
    """The summaries for people: a line per table, then its reasons and its days."""
    if not summaries:
        return Group(Text("no quarantine table in this lake yet"))
    parts: list[object] = []
    for n, summary in enumerate(summaries):
        heading = f"{summary.table}: {console.plural(summary.records, 'record')}"
        parts.append(Text(("\n" if n else "") + heading))
        if not summary.records:
            continue
        reasons = console.table("records", "reason", numeric=("records",))
        for count in summary.by_reason[:shown]:
            reasons.add_row(str(count.records), count.reason)
        hidden = summary.by_reason[shown:]
        if hidden:
            more = sum(c.records for c in hidden)
            reasons.add_row(str(more), f"({console.plural(len(hidden), 'other reason')})")
        days = console.table("day", "records", numeric=("records",))
        for count in summary.by_day:
            days.add_row(str(count.day or "(no ingestion time)"), str(count.records))
        parts += [Padding(table, (0, 0, 0, 2)) for table in (reasons, days)]
    return Group(*parts)
