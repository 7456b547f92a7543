"""``medallion status``: every table's version, size and last commit, every stream's last batch,
throughput and lag.

Lag is read from the checkpoints, so it is right whether the streams run or not
(ops/status_lag.py): landed files not taken, Kafka records not read, versions of a Delta source
not read; or, when it cannot be told, why (``--max-lag`` then exits 3 unless a stream is
behind).

Throughput comes from the last batch with input rows recorded in
``<lake>/_system/stream_progress``; input lost before it was read, from ``_system/data_gaps``;
the expectations that records broke, and how often, from ``_system/data_quality``.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from rich.console import Group, RenderableType

from medallion.config import Config
from medallion.console import plural, table
from medallion.delta_log import commit_actions, commit_info, commit_timestamp, committed_version
from medallion.deployment import flows_of, tables_of
from medallion.gaps import describe_gap, gaps_table, recorded_gaps
from medallion.ops.quality import failure_rates, render_rates
from medallion.ops.status_lag import landing_files, stream_lag
from medallion.ops.stream_lag import StreamLag
from medallion.quality_log import quality_table
from medallion.sql_names import TableRef
from medallion.storage import list_names
from medallion.streams import checkpoint_files as checkpoints
from medallion.streams.flows import Flow
from medallion.streams.progress import PROGRESS_TABLE_KEY, progress_table, read_progress
from medallion.tables import file_stats, history, row_count, table_exists


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def table_status(spark: SparkSession, table: TableRef) -> dict[str, Any]:
    """Version, rows, files, bytes, and the last commit's time and operation of one table: from
    its log and checksum file without a Spark job where it has them."""
    if not table_exists(spark, table):
        return {"table": table.key, "exists": False}
    version, committed_at, operation = _last_commit(spark, table)
    files, size = file_stats(spark, table)
    return {
        "table": table.key,
        "exists": True,
        "version": version,
        "rows": row_count(spark, table),
        "files": files,
        "size_bytes": size,
        "last_commit": committed_at,
        "last_operation": operation,
    }


def _last_commit(spark: SparkSession, table: TableRef) -> tuple[int, str | None, str | None]:
    """(version, time, operation) of the table's newest commit."""
    try:
        version = committed_version(spark, table)
        if version is not None:
            actions = commit_actions(spark, table, version)
            millis = commit_timestamp(actions)
            stamp = None if millis is None else datetime.fromtimestamp(millis / 1000, timezone.utc)
            return version, _iso(stamp), commit_info(actions).get("operation")
    except LookupError:
        pass  # a catalog table, or a log not readable from here: its history
    last = history(spark, table, 1).collect()[0]
    return int(last["version"]), _iso(last["timestamp"]), last["operation"]


def _last_progress(spark: SparkSession, config: Config) -> dict[str, dict[str, Any]]:
    """The last executed batch of each stream, from the progress table."""
    progress = read_progress(spark, config)
    if progress is None:
        return {}
    executed = progress.where(
        F.col("duration_ms").getItem("addBatch").isNotNull() & (F.col("num_input_rows") > 0)
    )
    latest = executed.groupBy("query_name").agg(F.max("timestamp").alias("timestamp"))
    rows = executed.join(latest, ["query_name", "timestamp"]).collect()
    return {
        r.query_name: {
            "batch_id": r.batch_id,
            "at": _iso(r.timestamp),
            "input_rows": r.num_input_rows,
            "rows_per_second": None
            if r.processed_rows_per_second is None
            else round(r.processed_rows_per_second, 1),
        }
        for r in rows
    }


def backlog_count(spark: SparkSession, config: Config, flow: Flow) -> tuple[int, str] | None:
    """What a stream has not read yet, from its checkpoint: ``(3, "file")`` landed files not
    taken, or ``(2, "version")`` versions of its Delta source not read; None when the
    checkpoint cannot tell (Kafka: the stream's progress reports its offsets)."""
    checkpoint = config.checkpoint(flow.name)
    if flow.source.key.startswith("landing/"):
        if config.source != "files":
            return None
        return landing_files(config, flow, config.landing)[1], "file"
    table = config.table(flow.source.key)
    position = checkpoints.delta_position(checkpoint) if table.path else None
    names = list_names(spark, f"{table.path}/_delta_log") if position else None
    versions = [int(n[:-5]) for n in names or () if n.endswith(".json") and n[:-5].isdigit()]
    if position is None or not versions:
        return None
    lag = StreamLag(flow.name, table.key, position.version, position.index, max(versions), None)
    return lag.versions_behind, "version"


def backlog(spark: SparkSession, config: Config, flow: Flow) -> str | None:
    """:func:`backlog_count` as text: ``3 files``, ``2 versions``."""
    count = backlog_count(spark, config, flow)
    return None if count is None else plural(*count)


def stream_status(
    spark: SparkSession,
    config: Config,
    flow: Flow,
    landing: str | None,
    progress: dict[str, dict[str, Any]],
    not_asked: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Last committed batch, last recorded throughput and lag of one stream (``not_asked``: see
    :func:`~medallion.ops.status_lag.stream_lag`)."""
    checkpoint = config.checkpoint(flow.name)
    return {
        "stream": flow.name,
        "layer": flow.layer,
        "reads": flow.reads,
        "started": checkpoints.exists(checkpoint),
        "last_batch": checkpoints.committed_batch(checkpoint),
        "planned_batch": checkpoints.planned_batch(checkpoint),
        "last_progress": progress.get(flow.name),
        "lag": stream_lag(spark, config, flow, landing, not_asked),
    }


def lake_status(spark: SparkSession, config: Config, landing: str | None = None) -> dict[str, Any]:
    """Everything ``medallion status`` shows, as plain data (what ``--json`` prints)."""
    tables = [*tables_of(config), progress_table(config), quality_table(config)]
    progress = _last_progress(spark, config)
    gaps = recorded_gaps(spark, config)
    not_asked: dict[str, str] = {}  # a broker that does not answer is waited for once
    return {
        "lake": config.lake,
        "tables": [table_status(spark, t) for t in tables],
        "streams": [
            stream_status(spark, config, f, landing, progress, not_asked) for f in flows_of(config)
        ],
        "data_gaps": len(gaps),
        "gaps_table": gaps_table(config).key,
        "latest_gaps": [describe_gap(gap) for gap in gaps[-5:]],
        "expectations_failed": failure_rates(spark, config),
    }


def _lag_text(lag: dict[str, Any]) -> str:
    if "note" in lag:
        return lag["note"]
    if "unknown" in lag:
        return f"unknown: {lag['unknown']}"
    if lag["kind"] == "kafka":
        topics = ", ".join(
            t["topic"] + ("" if t["partitions"] else " (not created yet)") for t in lag["topics"]
        )
        return f"{lag['records_behind']:,} records of {topics} unread"
    if lag["kind"] == "files":
        text = f"{lag['pending_files']} of {lag['landed']} landed files not ingested"
        if lag["replaced_files"]:
            text += (
                f"; {len(lag['replaced_files'])} REPLACED after ingestion, new content not read: "
                f"{lag['replaced_files'][0]} (docs/operations.md)"
            )
        return text
    if lag["position"] is None:
        return f"not started: {lag['versions_behind']} versions of {lag['source']} unread"
    return (
        f"{lag['versions_behind']} versions of {lag['source']} unread "
        f"(at {lag['position']}, latest {lag['source_version']})"
    )


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def render_status(status: dict[str, Any]) -> Group:
    """``status`` as two tables: the lake's tables, then its streams and their lag."""
    tables = table(
        "table",
        "version",
        "rows",
        "files",
        "bytes",
        "last commit",
        "operation",
        numeric=("version", "rows", "files", "bytes"),
    )
    for t in status["tables"]:
        if not t["exists"]:
            tables.add_row(t["table"], "(not created)")
            continue
        tables.add_row(
            t["table"],
            str(t["version"]),
            _count(t["rows"]),
            _count(t["files"]),
            _count(t["size_bytes"]),
            t["last_commit"],
            t["last_operation"],
        )
    streams = table("stream", "batch", "rows/s", "last data at", "lag", numeric=("batch", "rows/s"))
    for s in status["streams"]:
        progress = s["last_progress"] or {}
        rate = progress.get("rows_per_second")
        streams.add_row(
            s["stream"],
            "-" if s["last_batch"] is None else str(s["last_batch"]),
            "-" if rate is None else f"{rate:,}",
            progress.get("at") or "-",
            _lag_text(s["lag"]),
        )
    parts: list[RenderableType] = [f"lake {status['lake']}", "", tables, "", streams]
    rates = status.get("expectations_failed")
    if rates:
        parts += ["", "expectations that records broke (<lake>/_system/data_quality):"]
        parts.append(render_rates(rates))
    gaps = status.get("data_gaps", 0)
    if gaps:
        parts += [
            "",
            f"{gaps} input gap{'s' if gaps > 1 else ''} recorded in {status['gaps_table']} "
            "(input lost before it was read; docs/operations.md), the latest:",
            *(f"  {text}" for text in status["latest_gaps"]),
        ]
    return Group(*parts)


def behind(
    status: dict[str, Any],
    max_lag: int | None = None,
    max_age_minutes: float | None = None,
    now: datetime | None = None,
) -> list[str]:
    """The streams of ``status`` that are behind, one sentence each: more than ``max_lag``
    landed files, Kafka records or source versions unread, or a last batch with data older than
    ``max_age_minutes`` (a started stream without one counts as old). As ``dbt source
    freshness``, for cron and CI to alert on."""
    now = now or datetime.now(timezone.utc)
    problems = []
    for stream in status["streams"]:
        lag = stream["lag"]
        unread = next((lag[k] for k in _UNREAD if lag.get(k) is not None), None)
        if max_lag is not None and unread is not None and unread > max_lag:
            problems.append(
                f"{stream['stream']}: {unread} {_unread_what(lag)} unread (at most {max_lag})"
            )
        if max_age_minutes is None or not stream["started"] or lag.get("kind") == "fused":
            continue
        at = (stream["last_progress"] or {}).get("at")
        age = None if at is None else (now - datetime.fromisoformat(at)).total_seconds() / 60
        if age is None or age > max_age_minutes:
            since = "none recorded" if age is None else f"{age:.0f} minutes ago"
            problems.append(
                f"{stream['stream']}: last batch with data {since} "
                f"(at most {max_age_minutes:g} minutes)"
            )
    return problems


def lag_unknown(status: dict[str, Any]) -> list[str]:
    """The streams of ``status`` whose lag cannot be told, one sentence each with why:
    ``--max-lag`` cannot vouch for them (``medallion status`` exits 3 for them)."""
    return [
        f"{stream['stream']}: lag unknown: {stream['lag']['unknown']}"
        for stream in status["streams"]
        if "unknown" in stream["lag"]
    ]


# What a stream has not read, by its source's kind: the first of these its lag has.
_UNREAD = ("pending_files", "records_behind", "versions_behind")


def _unread_what(lag: dict[str, Any]) -> str:
    if lag["kind"] == "files":
        return "landed files"
    if lag["kind"] == "kafka":
        return f"Kafka records of {', '.join(t['topic'] for t in lag['topics'])}"
    return f"versions of {lag['source']}"


def status_json(status: dict[str, Any]) -> str:
    """``status`` as indented JSON."""
    return json.dumps(status, indent=2, default=str)


__all__ = [
    "PROGRESS_TABLE_KEY",
    "behind",
    "lag_unknown",
    "lake_status",
    "render_status",
    "status_json",
]
