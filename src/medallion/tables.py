"""Creating, registering and reading the declared tables of a Config (what their Delta logs
tell without a Spark job is in medallion/delta_log.py)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import date, datetime

from delta.tables import DeltaTable
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, DataFrameWriter, SparkSession
from pyspark.sql import functions as F

from medallion.config import Config
from medallion.delta_log import COMMIT_FILE, committed_version, latest_checksum
from medallion.deployment import pipelines_of, tables_of
from medallion.first_commit import write_first_commit
from medallion.locks import stream_locks
from medallion.parallel import in_parallel
from medallion.pipelines import declared_table
from medallion.quality_log import quality_table_spec
from medallion.session import is_connect_session
from medallion.sql_names import TableRef, quote_identifier, quote_principal, sql_string
from medallion.storage import delete_folder, folder_exists, list_names

log = logging.getLogger(__name__)


def table_version(spark: SparkSession, table: TableRef) -> int | None:
    """The table's latest version, or None when it does not exist."""
    try:
        return committed_version(spark, table)
    except LookupError:
        if not table_exists(spark, table):
            return None
        return int(history(spark, table, 1).collect()[0]["version"])


def file_stats(spark: SparkSession, table: TableRef) -> tuple[int, int]:
    """(files, bytes) of the table's latest version: from its checksum file when it has one,
    which costs no Spark job; otherwise from ``DESCRIBE DETAIL``."""
    checksum = latest_checksum(spark, table)
    if checksum is not None and "numFiles" in checksum and "tableSizeBytes" in checksum:
        return int(checksum["numFiles"]), int(checksum["tableSizeBytes"])
    detail = spark.sql(f"DESCRIBE DETAIL {table.sql_name}").collect()[0]
    return int(detail["numFiles"] or 0), int(detail["sizeInBytes"] or 0)


def row_count(spark: SparkSession, table: TableRef) -> int:
    """The rows of the table's latest version.

    A small table's checksum file lists its files (``allFiles``), each with its row count in
    its statistics, less the rows its deletion vector deletes: their sum costs no Spark job.
    Otherwise the table is counted.
    """
    checksum = latest_checksum(spark, table) or {}
    files = checksum.get("allFiles")
    if files is not None and len(files) == checksum.get("numFiles"):
        try:
            return sum(
                int(json.loads(f["stats"])["numRecords"])
                - int((f.get("deletionVector") or {}).get("cardinality", 0))
                for f in files
            )
        except (KeyError, TypeError, ValueError):
            pass  # a file written without statistics
    return read_table(spark, table).count()


def holds_data(spark: SparkSession, table: TableRef) -> bool:
    """True when the table has been written to: a commit after its creation, and data files."""
    if (table_version(spark, table) or 0) == 0:
        return False
    return file_stats(spark, table)[0] > 0


def table_exists(spark: SparkSession, table: TableRef) -> bool:
    """True when the table exists as a Delta table: for a path, when its log has a commit.

    A ``_delta_log`` folder without a commit (a creation killed half-way leaves one, for
    example holding an empty ``_staged_commits/``) is not a table.

    Tables are checked, created, merged into and read with SQL rather than the ``DeltaTable``
    API, so the pipeline also runs over Spark Connect where Delta's Connect plugin is absent.
    """
    if table.path is not None:
        try:
            return committed_version(spark, table) is not None
        except LookupError:
            pass
        try:
            spark.sql(f"DESCRIBE DETAIL {table.sql_name}")
        except AnalysisException:
            return False
        return True
    return spark.catalog.tableExists(table.qualified_name.replace("`", ""))


def pipelines_with_tables(spark: SparkSession, config: Config) -> list[str]:
    """The names of the Config's pipelines that have at least one table in the lake."""
    return [
        p.name
        for p in pipelines_of(config)
        if any(table_exists(spark, config.table(t.key)) for t in p.tables)
    ]


def in_lake(spark: SparkSession, config: Config) -> Config:
    """``config`` narrowed to the pipelines that have tables in the lake, unless it names its
    pipelines or none has any (then it is returned as it is)."""
    if config.pipelines:
        return config
    present = pipelines_with_tables(spark, config)
    return config.with_options(pipelines=tuple(present)) if present else config


def discard_uncommitted_log(spark: SparkSession, table: TableRef) -> bool:
    """Delete the ``_delta_log`` of a table folder that has no commit; True when it did.

    Such a log holds nothing a reader could see (the table was never created), but
    ``CREATE TABLE IF NOT EXISTS`` would take the folder for a table and every later step
    would fail. Only call it while no other writer can be creating the table (runs hold the
    lake's stream locks, medallion/locks.py).
    """
    if table.path is None:
        return False
    log_dir = f"{table.path.rstrip('/')}/_delta_log"
    names = list_names(spark, log_dir)
    # An empty _delta_log counts too: a kill can come right after the folder was made.
    if names is None or any(COMMIT_FILE.match(name) for name in names):
        return False
    if not names and not folder_exists(spark, log_dir):
        return False
    log.warning(
        "%s: its creation was cut short (a _delta_log with no commit); creating it again",
        table.key,
    )
    delete_folder(spark, log_dir)
    return True


def delta_table(spark: SparkSession, table: TableRef) -> DeltaTable:
    """The :class:`DeltaTable` handle of a table, by path locally or by name in Unity Catalog."""
    if table.path is not None:
        return DeltaTable.forPath(spark, table.path)
    return DeltaTable.forName(spark, table.qualified_name)


def history(spark: SparkSession, table: TableRef, limit: int | None = None) -> DataFrame:
    """The table's commits, newest first (``DESCRIBE HISTORY``), at most ``limit`` of them."""
    limit_clause = f" LIMIT {int(limit)}" if limit is not None else ""
    return spark.sql(f"DESCRIBE HISTORY {table.sql_name}{limit_clause}")


def read_table(spark: SparkSession, table: TableRef, version: int | None = None) -> DataFrame:
    """A batch read of the table's latest version (or of ``version``)."""
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", int(version))
    if table.path is not None:
        return reader.load(table.path)
    return reader.table(table.qualified_name)


def read_commit_changes(spark: SparkSession, table: TableRef, version: int) -> DataFrame:
    """The Change Data Feed of one commit of the table: its rows with ``_change_type``."""
    reader = spark.read.format("delta").option("readChangeFeed", "true")
    reader = reader.option("startingVersion", int(version)).option("endingVersion", int(version))
    if table.path is not None:
        return reader.load(table.path)
    return reader.table(table.qualified_name)


def table_properties(spark: SparkSession, table: TableRef) -> dict[str, str]:
    """The table's properties (``TBLPROPERTIES``): from its checksum file when it has one,
    which costs no Spark job; otherwise from ``DESCRIBE DETAIL``."""
    metadata = (latest_checksum(spark, table) or {}).get("metadata")
    if metadata is not None:
        return dict(metadata.get("configuration") or {})
    return dict(spark.sql(f"DESCRIBE DETAIL {table.sql_name}").first().properties or {})


def allow_deletes(spark: SparkSession, table: TableRef) -> None:
    """Lift ``delta.appendOnly`` from a table created with it, so that rows can be deleted (a
    quarantine replay, an erasure: docs/governance.md)."""
    if table_properties(spark, table).get("delta.appendOnly", "false").lower() == "true":
        spark.sql(f"ALTER TABLE {table.sql_name} SET TBLPROPERTIES ('delta.appendOnly' = 'false')")


def write_log_checkpoint(spark: SparkSession, table: TableRef) -> bool:
    """Write a Delta checkpoint of the table's latest version (a path table in this JVM), so
    that log cleanup may drop the commits before it once their retention has passed. False
    where this process cannot (a catalog table, Spark Connect: Databricks writes its own)."""
    if table.path is None or is_connect_session(spark):
        return False
    jvm = spark.sparkContext._jvm  # type: ignore[union-attr]
    jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, table.path).checkpoint()
    return True


def rows_frame(spark: SparkSession, rows: Sequence[dict], columns: str) -> DataFrame:
    """Plain rows (dicts) with this DDL schema, in one partition, parsed in the JVM from one
    JSON literal: unlike ``createDataFrame`` of Python rows, no Python worker process starts
    (about a second in a new process), and the Py4J calls do not grow with the rows. A value
    that does not fit its column fails the query instead of becoming a null."""
    text = json.dumps(list(rows), default=_json_value)
    parsed = F.from_json(F.lit(text), f"ARRAY<STRUCT<{columns}>>", {"mode": "FAILFAST"})
    return spark.range(1, numPartitions=1).select(F.inline(parsed))


def _json_value(value: object) -> str:
    if isinstance(value, date | datetime):
        return value.isoformat()
    raise TypeError(f"no JSON form for a {type(value).__name__}: {value!r}")


def append_rows(spark: SparkSession, table: TableRef, rows: list[dict], columns: str) -> None:
    """Append plain rows (dicts) with this DDL schema to an existing table, as one file."""
    if rows:
        save(rows_frame(spark, rows, columns).write.format("delta").mode("append"), table)


def save(writer: DataFrameWriter, table: TableRef) -> None:
    """Run a Delta batch write to the table: by path locally, by name in Unity Catalog."""
    if table.path is not None:
        writer.save(table.path)
    else:
        writer.saveAsTable(table.qualified_name)


def create_delta_table(
    spark: SparkSession,
    table: TableRef,
    columns: str,
    properties: dict[str, str],
    partitioned_by: Sequence[str] = (),
    clustered_by: Sequence[str] = (),
) -> None:
    """``CREATE TABLE IF NOT EXISTS`` with these columns, properties and layout; a folder left
    by a creation that a crash cut short is discarded first. A path whose log has a commit is
    left alone without a Spark command (a new process pays seconds for each one)."""
    if table.path is not None and table_exists(spark, table):
        return
    discard_uncommitted_log(spark, table)
    if not clustered_by and write_first_commit(spark, table, columns, properties, partitioned_by):
        return
    layout = ""
    if partitioned_by:
        layout = f" PARTITIONED BY ({', '.join(quote_identifier(c) for c in partitioned_by)})"
    if clustered_by:
        layout = f" CLUSTER BY ({', '.join(quote_identifier(c) for c in clustered_by)})"
    pairs = ", ".join(f"'{key}' = '{value}'" for key, value in properties.items())
    clause = f" TBLPROPERTIES ({pairs})" if pairs else ""
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS {table.sql_name} ({columns}) USING DELTA{layout}{clause}"
    )


def create_table(spark: SparkSession, table: TableRef) -> None:
    """Create one declared table, with its schema, properties and layout, if it does not exist."""
    declared = declared_table(table.key)
    create_delta_table(
        spark,
        table,
        declared.schema,
        dict(declared.properties),
        declared.partitioned_by,
        declared.clustered_by,
    )


# What each local session has registered: application id -> {qualified name: location}. The
# names live in the session's in-memory catalog, so re-registering them for every run costs
# three catalog commands per table for nothing.
_REGISTERED: dict[str, dict[str, str]] = {}


def _registrations(spark: SparkSession) -> dict[str, str]:
    """This session's registrations (a throwaway dict over Spark Connect: nothing is cached)."""
    try:
        application = spark.sparkContext.applicationId
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
        return {}
    return _REGISTERED.setdefault(application, {})


def register_tables(spark: SparkSession, config: Config) -> None:
    """Register path-based tables by name (``medallion.silver_events``) in the session catalog.

    A name always ends up pointing at this config's lake, even when the session registered it
    for another lake before. The entries are external tables (they have a LOCATION), so dropping
    one removes the name only, never data.
    """
    if config.uses_unity_catalog:
        return
    spark.sql(f"CREATE SCHEMA IF NOT EXISTS {quote_identifier(config.schema)}")
    registered = _registrations(spark)

    def register(table: TableRef) -> None:
        if table.path is None or registered.get(table.qualified_name) == table.path:
            return
        if table_exists(spark, table):
            spark.sql(f"DROP TABLE IF EXISTS {table.qualified_name}")
            location = sql_string(table.path)
            spark.sql(f"CREATE TABLE {table.qualified_name} USING DELTA LOCATION {location}")
            registered[table.qualified_name] = table.path

    in_parallel(register, tables_of(config), "register")


def unregister_table(spark: SparkSession, table: TableRef) -> None:
    """Drop a path-based table's name from the session catalog (never its data)."""
    spark.sql(f"DROP TABLE IF EXISTS {table.qualified_name}")
    _registrations(spark).pop(table.qualified_name, None)


# Tables are created under this lock (medallion/locks.py): tasks that start together create
# the same tables, and a creation cut short by a crash is only discarded by whoever holds it.
SETUP_LOCK = "_setup"


def reader_grants(config: Config) -> list[str]:
    """The statements that give ``config.readers`` SELECT on every gold table: Unity Catalog
    tables only (a path table has no grants), none without readers.

    >>> c = Config(landing="/l", lake="/l", catalog="main", readers="analysts", pipelines=("iot",))
    >>> reader_grants(c)[0]
    'GRANT SELECT ON TABLE `main`.`medallion`.`gold_device_status` TO `analysts`'
    """
    if not config.uses_unity_catalog or not config.readers:
        return []
    principal = quote_principal(config.readers)
    gold = [t for t in tables_of(config) if t.layer == "gold"]
    return [f"GRANT SELECT ON TABLE {t.qualified_name} TO {principal}" for t in gold]


def ensure_tables(
    spark: SparkSession,
    config: Config,
    more: Sequence[tuple[TableRef, str, dict[str, str]]] = (),
    register_names: bool = True,
) -> None:
    """Create every contract table that is missing, the data-quality log (quality_log.py) and
    ``more`` ((table, columns, properties)), then register them all by name (unless
    ``register_names`` is False)."""
    with stream_locks(config.checkpoints_folder, [SETUP_LOCK], "create tables", wait_seconds=300):
        if config.uses_unity_catalog:
            spark.sql(
                f"CREATE SCHEMA IF NOT EXISTS {quote_identifier(config.catalog or '', config.schema)}"
            )
        in_parallel(lambda table: create_table(spark, table), tables_of(config), "create-table")
        for table, columns, properties in (*more, quality_table_spec(config)):
            create_delta_table(spark, table, columns, properties)
        for statement in reader_grants(config):
            spark.sql(statement)
        if register_names:
            register_tables(spark, config)
