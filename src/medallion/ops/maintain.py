"""Table maintenance: compaction with Z-ordering, and a VACUUM that never breaks a stream.

``maintain`` runs, per table, ``OPTIMIZE`` (Z-ordered on the keys its declaration names) and
then ``VACUUM ... RETAIN n HOURS``. Both are safe while the pipeline runs:

- OPTIMIZE commits with ``dataChange=false``: streams reading the table skip those commits,
  so compacted rows are never read twice. A MERGE of a running stream that races an OPTIMIZE
  is retried by the stream (medallion/conflicts.py); an OPTIMIZE that races a stream's
  commit is retried here, and skipped (reported, not fatal) if it keeps losing.
- VACUUM deletes only files that no version younger than the retention references. The
  retention is refused (:class:`VacuumRefused`) unless it is at least the table's
  ``delta.deletedFileRetentionDuration`` (Delta's own check, 7 days by default), longer than
  ``Config.max_stream_downtime_hours``, and longer than the age of the oldest commit any
  stream reading the table has not read yet (read from its checkpoint). Checkpoints live
  under ``<lake>/_checkpoints``, outside every table folder, where VACUUM never looks.

Why these keys, and the rules: docs/operations.md.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone

from pyspark.sql import SparkSession
from rich.table import Table

from medallion import console
from medallion.config import Config
from medallion.conflicts import is_write_conflict, retry_on_conflict
from medallion.declarations import Maintenance
from medallion.deployment import tables_of
from medallion.errors import ConfigError
from medallion.ops.stream_lag import stream_lags
from medallion.pipelines import all_tables
from medallion.quality_log import QUALITY_TABLE_KEY
from medallion.sql_names import TableRef
from medallion.streams.progress import PROGRESS_TABLE_KEY, lake_table
from medallion.tables import file_stats, table_exists, table_properties

log = logging.getLogger(__name__)

DEFAULT_RETENTION_HOURS = 168.0


_INTERVAL_PART = re.compile(
    r"(-?\d+(?:\.\d+)?)\s*(weeks?|days?|hours?|minutes?|seconds?|milliseconds?|microseconds?)",
    re.IGNORECASE,
)
_HOURS_PER_UNIT = {
    "week": 168.0,
    "day": 24.0,
    "hour": 1.0,
    "minute": 1 / 60,
    "second": 1 / 3600,
    "millisecond": 1 / 3_600_000,
    "microsecond": 1 / 3_600_000_000,
}


class VacuumRefused(ConfigError):
    """The VACUUM retention is below the safe minimum; the message says why and what is safe."""


def interval_hours(text: str) -> float:
    """Hours in a Delta interval property, for example ``interval 1 week`` -> 168.0."""
    parts = _INTERVAL_PART.findall(text)
    if not parts:
        raise ValueError(f"not an interval: {text!r}")
    return sum(float(n) * _HOURS_PER_UNIT[unit.lower().rstrip("s")] for n, unit in parts)


@dataclass
class TableMaintenance:
    """What maintenance did to one table."""

    table: str
    files_before: int | None = None
    files_after: int | None = None
    zorder: tuple[str, ...] = ()
    # Liquid clustering keys: OPTIMIZE clusters the table by them (no Z-order).
    clustered_by: tuple[str, ...] = ()
    optimized: bool = False
    vacuumed_files: int | None = None
    notes: list[str] = field(default_factory=list)


def zorder_keys(key: str) -> tuple[str, ...]:
    """The columns a table is Z-ordered by: its declaration's (none for medallion's own)."""
    declared = all_tables().get(key)
    return declared.zorder if declared is not None else ()


def clustering_keys(key: str) -> tuple[str, ...]:
    """The liquid clustering keys of a declared table (none for medallion's own)."""
    declared = all_tables().get(key)
    return declared.clustered_by if declared is not None else ()


def policy(key: str) -> Maintenance:
    """The maintenance a table's declaration asks for (the default for medallion's own)."""
    declared = all_tables().get(key)
    return declared.maintenance if declared is not None else Maintenance()


def retention_for(key: str, hours: float) -> float:
    """The VACUUM retention of one table: the run's, or its declaration's least if longer."""
    least = policy(key).min_retention_hours
    return hours if least is None else max(hours, least)


def maintained_tables(config: Config, only: Sequence[str] = ()) -> list[TableRef]:
    """The tables to maintain: ``only`` (keys), or every table of the Config's pipelines and
    the progress and data-quality logs."""
    known = [*(t.key for t in tables_of(config)), PROGRESS_TABLE_KEY, QUALITY_TABLE_KEY]
    for key in only:
        if key not in known:
            raise ConfigError(f"unknown table {key!r}; known tables: {', '.join(known)}")
    keys = list(only) or known
    return [lake_table(config, k) for k in keys]


def _file_count(spark: SparkSession, table: TableRef) -> int:
    """The files of the table's latest version (from its checksum file when it has one)."""
    return file_stats(spark, table)[0]


def deleted_file_retention_hours(spark: SparkSession, table: TableRef) -> float:
    """The table's ``delta.deletedFileRetentionDuration`` in hours (Delta's default: 168)."""
    value = table_properties(spark, table).get("delta.deletedFileRetentionDuration")
    return interval_hours(value) if value else DEFAULT_RETENTION_HOURS


def check_vacuum_retention(
    spark: SparkSession,
    config: Config,
    table: TableRef,
    retention_hours: float,
    now: datetime | None = None,
) -> None:
    """Raise :class:`VacuumRefused` unless ``retention_hours`` is safe for ``table``."""
    now = now or datetime.now(timezone.utc)
    delta_minimum = deleted_file_retention_hours(spark, table)
    downtime = config.max_stream_downtime_hours
    if retention_hours < delta_minimum:
        raise VacuumRefused(
            f"VACUUM retention {retention_hours:g} hours for {table.key} is below Delta's "
            f"retention check ({delta_minimum:g} hours, delta.deletedFileRetentionDuration): "
            f"files a stream or a time-travel query may still read would be deleted; "
            f"use --vacuum-retention {max(delta_minimum, downtime):g} or more"
        )
    if retention_hours <= downtime:
        raise VacuumRefused(
            f"VACUUM retention {retention_hours:g} hours for {table.key} is not longer than the "
            f"maximum stream downtime ({downtime:g} hours, Config.max_stream_downtime_hours): "
            f"a stream stopped that long would resume to find the files it has to read deleted; "
            f"use a retention above {downtime:g} hours"
        )
    for lag in stream_lags(spark, config, table):
        behind = lag.hours_behind(now)
        if behind and retention_hours <= behind:
            raise VacuumRefused(
                f"VACUUM retention {retention_hours:g} hours for {table.key} would delete files "
                f"stream {lag.stream} still has to read: it stands at version {lag.position} of "
                f"{lag.latest_version}, and version {lag.position + 1} was committed "
                f"{behind:.2f} hours ago; run the stream first, or retain more than "
                f"{behind:.2f} hours"
            )


def _check_checkpoints_outside(config: Config, tables: Sequence[TableRef]) -> None:
    root = config.checkpoints_folder + "/"
    for table in tables:
        if table.path and root.startswith(table.path.rstrip("/") + "/"):
            raise VacuumRefused(
                f"checkpoints ({root}) lie inside table {table.key}: VACUUM would delete them"
            )


def optimize(spark: SparkSession, table: TableRef, attempts: int = 4) -> TableMaintenance:
    """Compact one table (Z-ordered on its keys); skipped when it has fewer than two files."""
    keys = zorder_keys(table.key)
    result = TableMaintenance(table.key, zorder=keys, clustered_by=clustering_keys(table.key))
    result.files_before = _file_count(spark, table)
    if result.files_before < 2:
        result.notes.append("nothing to compact")
        result.files_after = result.files_before
        return result
    zorder = f" ZORDER BY ({', '.join(f'`{k}`' for k in keys)})" if keys else ""
    statement = f"OPTIMIZE {table.sql_name}{zorder}"
    log.info("%s", statement)
    try:
        retry_on_conflict(lambda: spark.sql(statement).collect(), statement, attempts, 1.0)
        result.optimized = True
    except Exception as error:
        if not is_write_conflict(error):
            raise
        log.warning("%s kept conflicting with a running stream; skipped this time", statement)
        result.notes.append("skipped: kept conflicting with concurrent writes")
    result.files_after = _file_count(spark, table)
    return result


# Delta 4 ignores a RETAIN other than 0 hours unless this is off (it then uses the table's
# delta.deletedFileRetentionDuration instead): VACUUM turns it off so the checked retention is
# the one applied.
_IGNORE_RETAIN = "spark.databricks.delta.vacuum.retentionWindowIgnore.enabled"


@contextmanager
def _conf(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    before = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


# Files whose modification time is within this much of the VACUUM's cutoff count as older:
# the skip below must never keep a file that VACUUM, on its own clock, would delete.
_MTIME_SLACK_S = 300.0


def vacuum(spark: SparkSession, table: TableRef, retention_hours: float) -> int | None:
    """VACUUM one table (after :func:`check_vacuum_retention`); returns how many files it
    deleted, or None when it was not run because it could delete nothing.

    The count is of data files on disk before and after for a local table, else the files a
    ``DRY RUN`` lists. A local table none of whose files is older than the retention is left
    alone: VACUUM deletes only files modified before its cutoff (a removed file's deletion
    time is later than its modification time), and it would cost a listing of the folder and
    a join with the table's state, in Spark jobs.
    """
    retain = f"RETAIN {float(retention_hours):g} HOURS"
    cutoff = time.time() - retention_hours * 3600 + _MTIME_SLACK_S
    files = _local_files(table)
    if files is not None and min(map(os.path.getmtime, files), default=float("inf")) > cutoff:
        log.info(
            "VACUUM %s %s: no file is older than that; nothing it could delete", table.key, retain
        )
        return None
    doomed = 0
    with _conf(spark, _IGNORE_RETAIN, "false"):
        before = None if files is None else _count_data_files(files)
        if before is None:
            doomed = spark.sql(f"VACUUM {table.sql_name} {retain} DRY RUN").count()
        spark.sql(f"VACUUM {table.sql_name} {retain}").collect()
        after = data_files(table)
    deleted = before - after if before is not None and after is not None else doomed
    log.info("VACUUM %s %s: %d files deleted", table.key, retain, deleted)
    return deleted


def maintain(
    spark: SparkSession,
    config: Config,
    tables: Sequence[str] = (),
    vacuum_retention_hours: float | None = DEFAULT_RETENTION_HOURS,
    run_optimize: bool = True,
) -> list[TableMaintenance]:
    """OPTIMIZE and then VACUUM the tables (``tables``: keys; default: all of them).

    ``vacuum_retention_hours=None`` skips VACUUM. Every retention is checked before anything
    runs, so a refused VACUUM changes nothing.
    """
    refs = [t for t in maintained_tables(config, tables) if table_exists(spark, t)]
    vacuumed = [t for t in refs if policy(t.key).vacuum and vacuum_retention_hours is not None]
    if vacuum_retention_hours is not None:
        _check_checkpoints_outside(config, vacuumed)
        for table in vacuumed:
            hours = retention_for(table.key, vacuum_retention_hours)
            check_vacuum_retention(spark, config, table, hours)
    results = []
    for table in refs:
        if run_optimize and policy(table.key).optimize:
            result = optimize(spark, table)
        else:
            count = _file_count(spark, table)
            result = TableMaintenance(
                table.key, count, count, zorder_keys(table.key), clustering_keys(table.key)
            )
            if run_optimize:
                result.notes.append("no OPTIMIZE (its declaration)")
        if table in vacuumed:
            assert vacuum_retention_hours is not None
            hours = retention_for(table.key, vacuum_retention_hours)
            deleted = vacuum(spark, table, hours)
            result.vacuumed_files = deleted or 0
            if deleted is None:
                result.notes.append(f"no file older than {hours:g} hours to VACUUM")
        elif vacuum_retention_hours is not None:
            result.notes.append("no VACUUM (its declaration)")
        results.append(result)
    return results


def render(results: Sequence[TableMaintenance]) -> Table:
    """A maintenance run as a table: files before and after, files vacuumed, layout and notes."""
    counts = ("files before", "files after", "vacuumed")
    shown = console.table("table", *counts, "z-order / notes", numeric=counts)
    for r in results:
        vacuumed = "-" if r.vacuumed_files is None else str(r.vacuumed_files)
        clustered = f"clustered by {', '.join(r.clustered_by)}" if r.clustered_by else ""
        layout = ", ".join(r.zorder) or clustered or "(bin-packing)"
        notes = ", ".join([layout, *r.notes])
        shown.add_row(r.table, str(r.files_before), str(r.files_after), vacuumed, notes)
    return shown


def files_on_disk(table: TableRef) -> int:
    """Parquet data files in a local table folder, referenced or not (0 for a catalog table)."""
    if table.path is None or not os.path.isdir(table.path):
        return 0
    count = 0
    for _root, dirs, files in os.walk(table.path):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        count += sum(1 for f in files if f.endswith(".parquet"))
    return count


def _local_files(table: TableRef) -> list[str] | None:
    """Every file of a local table folder outside ``_delta_log`` (change data and side files
    included), or None when the table is not a local folder."""
    if table.path is None or "://" in table.path or not os.path.isdir(table.path):
        return None
    found = []
    for root, dirs, files in os.walk(table.path):
        if root == table.path:
            dirs[:] = [d for d in dirs if d != "_delta_log"]
        found += [os.path.join(root, name) for name in files]
    return found


def _count_data_files(files: Sequence[str]) -> int:
    return sum(1 for path in files if not os.path.basename(path).startswith("."))  # no .crc


def data_files(table: TableRef) -> int | None:
    """Every file of a local table folder outside ``_delta_log`` (change data included), or
    None when the table is not a local folder."""
    files = _local_files(table)
    return None if files is None else _count_data_files(files)
