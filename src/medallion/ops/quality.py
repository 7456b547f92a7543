"""Failure rates of the expectations, from the data-quality log (``<lake>/_system/data_quality``):
what ``medallion status`` shows under its tables and streams."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from rich.table import Table

from medallion.config import Config
from medallion.console import table
from medallion.deployment import pipelines_of
from medallion.quality_log import quality_table
from medallion.tables import read_table, table_exists

# The recent window ``medallion status`` puts beside all time.
RECENT = timedelta(hours=24)


def failure_rates(
    spark: SparkSession, config: Config, now: datetime | None = None
) -> list[dict[str, Any]]:
    """Every expectation of the pipelines of ``config`` that some record broke: its rows
    checked and failed in the last 24 hours and in all, and the failure rate of each, with
    the action of its latest batch. One Spark job."""
    log = quality_table(config)
    datasets = [c.dataset for p in pipelines_of(config) for c in p.contracts]
    if not datasets or not table_exists(spark, log):
        return []
    since = (now or datetime.now(timezone.utc)) - RECENT
    recent = F.col("recorded_at") >= F.lit(since)
    checked = F.col("passed") + F.col("failed")
    rows = (
        read_table(spark, log)
        .where(F.col("dataset").isin(datasets))
        .groupBy("dataset", "rule")
        .agg(
            F.sum(F.when(recent, F.col("failed")).otherwise(0)).alias("failed_recent"),
            F.sum(F.when(recent, checked).otherwise(0)).alias("checked_recent"),
            F.sum("failed").alias("failed"),
            F.sum(checked).alias("checked"),
            F.max_by("action", F.struct("recorded_at", "batch_id")).alias("action"),
        )
        .where(F.col("failed") > 0)
        .orderBy(F.desc("failed"), "dataset", "rule")
        .collect()
    )
    return [
        {
            "expectation": f"{r.dataset}.{r.rule}",
            "action": r.action,
            "failed_24h": int(r.failed_recent),
            "rate_24h": r.failed_recent / r.checked_recent if r.checked_recent else None,
            "failed": int(r.failed),
            "rate": r.failed / r.checked,
        }
        for r in rows
    ]


def _percent(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.2%}"


def render_rates(rates: list[dict[str, Any]]) -> Table:
    """The failure rates as a table, most failures first."""
    shown = table(
        "expectation",
        "action",
        "failed (24 h)",
        "rate (24 h)",
        "failed",
        "rate",
        numeric=("failed (24 h)", "rate (24 h)", "failed", "rate"),
    )
    for rate in rates:
        shown.add_row(
            rate["expectation"],
            rate["action"],
            f"{rate['failed_24h']:,}",
            _percent(rate["rate_24h"]),
            f"{rate['failed']:,}",
            _percent(rate["rate"]),
        )
    return shown
