"""Table schemas and properties, and creating and registering the tables of a Config."""

from __future__ import annotations

from delta.tables import DeltaTable
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession

from medallion.config import Config, TableRef, quote_identifier
from medallion.parallel import in_parallel

_BRONZE_EVENT_FIELDS = (
    "event_id STRING, event_type STRING, user_id STRING, product_id STRING, category STRING, "
    "revenue STRING, event_timestamp STRING"
)
_INGEST_METADATA = "_raw STRING, _source_file STRING, _ingested_at TIMESTAMP"
# Where a record was read from Kafka; NULL for rows read from files, so both sources share a schema.
KAFKA_METADATA = (
    "_kafka_topic STRING, _kafka_partition INT, _kafka_offset BIGINT, _kafka_timestamp TIMESTAMP"
)

_BRONZE_CUSTOMER_FIELDS = (
    "customer_id STRING, name STRING, email STRING, country STRING, segment STRING, "
    "operation STRING, sequence_num STRING, updated_at STRING"
)
_CUSTOMER_STATE = (
    "customer_id STRING NOT NULL, name STRING, email STRING, country STRING, segment STRING, "
    "sequence_num BIGINT NOT NULL, updated_at TIMESTAMP, operation STRING, "
    "_ingested_at TIMESTAMP, _source_file STRING"
)

SCHEMAS: dict[str, str] = {
    "bronze/events": f"{_BRONZE_EVENT_FIELDS}, {_INGEST_METADATA}, {KAFKA_METADATA}",
    "silver/events": (
        "event_id STRING NOT NULL, event_type STRING NOT NULL, user_id STRING NOT NULL, "
        "product_id STRING NOT NULL, category STRING, revenue DECIMAL(18,4), "
        "event_timestamp TIMESTAMP NOT NULL, event_date DATE NOT NULL, "
        "_ingested_at TIMESTAMP, _source_file STRING"
    ),
    "silver/events_quarantine": (
        "event_id STRING, reason STRING NOT NULL, _raw STRING, _source_file STRING, "
        "_ingested_at TIMESTAMP"
    ),
    "gold/hourly_product_metrics": (
        "window_start TIMESTAMP NOT NULL, product_id STRING NOT NULL, window_end TIMESTAMP NOT NULL, "
        "views BIGINT NOT NULL, add_to_carts BIGINT NOT NULL, purchases BIGINT NOT NULL, "
        "revenue DECIMAL(28,4) NOT NULL, unique_users BIGINT NOT NULL"
    ),
    "bronze/customers": f"{_BRONZE_CUSTOMER_FIELDS}, {_INGEST_METADATA}, {KAFKA_METADATA}",
    "silver/customers": _CUSTOMER_STATE,
    "silver/customer_tombstones": (
        "customer_id STRING NOT NULL, sequence_num BIGINT NOT NULL, updated_at TIMESTAMP, "
        "_ingested_at TIMESTAMP"
    ),
    "silver/customers_quarantine": (
        "customer_id STRING, reason STRING NOT NULL, _raw STRING, _source_file STRING, "
        "_ingested_at TIMESTAMP"
    ),
    "gold/customer_changes": (
        f"{_CUSTOMER_STATE}, _change_type STRING NOT NULL, _commit_version BIGINT NOT NULL, "
        "_commit_timestamp TIMESTAMP NOT NULL"
    ),
    "gold/daily_revenue_by_country": (
        "event_date DATE NOT NULL, country STRING NOT NULL, revenue DECIMAL(28,4) NOT NULL, "
        "purchases BIGINT NOT NULL"
    ),
}

# Streaming tables take many small commits: let Delta compact and size files as it writes.
_STREAMING_WRITE_PROPERTIES = {
    "delta.autoOptimize.optimizeWrite": "true",
    "delta.autoOptimize.autoCompact": "true",
}

PROPERTIES: dict[str, dict[str, str]] = {
    "bronze/events": {**_STREAMING_WRITE_PROPERTIES, "delta.appendOnly": "true"},
    "silver/events": dict(_STREAMING_WRITE_PROPERTIES),
    "silver/events_quarantine": {**_STREAMING_WRITE_PROPERTIES, "delta.appendOnly": "true"},
    "gold/hourly_product_metrics": dict(_STREAMING_WRITE_PROPERTIES),
    "bronze/customers": {**_STREAMING_WRITE_PROPERTIES, "delta.appendOnly": "true"},
    "silver/customers": {**_STREAMING_WRITE_PROPERTIES, "delta.enableChangeDataFeed": "true"},
    "silver/customer_tombstones": dict(_STREAMING_WRITE_PROPERTIES),
    "silver/customers_quarantine": {**_STREAMING_WRITE_PROPERTIES, "delta.appendOnly": "true"},
    "gold/customer_changes": {**_STREAMING_WRITE_PROPERTIES, "delta.appendOnly": "true"},
    "gold/daily_revenue_by_country": dict(_STREAMING_WRITE_PROPERTIES),
}


def table_exists(spark: SparkSession, table: TableRef) -> bool:
    """True when the table exists as a Delta table.

    Tables are checked, created, merged into and read with SQL rather than the ``DeltaTable``
    API, so the pipeline also runs over Spark Connect where Delta's Connect plugin is absent.
    """
    if table.path is not None:
        try:
            spark.sql(f"DESCRIBE DETAIL {table.sql_name}")
        except AnalysisException:
            return False
        return True
    return spark.catalog.tableExists(table.qualified_name.replace("`", ""))


def delta_table(spark: SparkSession, table: TableRef) -> DeltaTable:
    """The :class:`DeltaTable` handle of a table, by path locally or by name in Unity Catalog."""
    if table.path is not None:
        return DeltaTable.forPath(spark, table.path)
    return DeltaTable.forName(spark, table.qualified_name)


def history(spark: SparkSession, table: TableRef, limit: int | None = None) -> DataFrame:
    """The table's commits, newest first (``DESCRIBE HISTORY``), at most ``limit`` of them."""
    limit_clause = f" LIMIT {int(limit)}" if limit is not None else ""
    return spark.sql(f"DESCRIBE HISTORY {table.sql_name}{limit_clause}")


def read_table(spark: SparkSession, table: TableRef) -> DataFrame:
    """A batch read of the table's latest version."""
    if table.path is not None:
        return spark.read.format("delta").load(table.path)
    return spark.read.table(table.qualified_name)


def create_table(spark: SparkSession, table: TableRef) -> None:
    """Create one contract table, with its schema and properties, if it does not exist."""
    pairs = ", ".join(
        f"'{key}' = '{value}'" for key, value in PROPERTIES.get(table.key, {}).items()
    )
    properties = f" TBLPROPERTIES ({pairs})" if pairs else ""
    columns = SCHEMAS[table.key]
    spark.sql(f"CREATE TABLE IF NOT EXISTS {table.sql_name} ({columns}) USING DELTA{properties}")


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
            location = table.path.replace("'", "\\'")
            spark.sql(f"DROP TABLE IF EXISTS {table.qualified_name}")
            spark.sql(f"CREATE TABLE {table.qualified_name} USING DELTA LOCATION '{location}'")
            registered[table.qualified_name] = table.path

    in_parallel(register, config.tables(), "register")


def unregister_table(spark: SparkSession, table: TableRef) -> None:
    """Drop a path-based table's name from the session catalog (never its data)."""
    spark.sql(f"DROP TABLE IF EXISTS {table.qualified_name}")
    _registrations(spark).pop(table.qualified_name, None)


def ensure_tables(spark: SparkSession, config: Config) -> None:
    """Create every contract table that is missing and register them all by name."""
    if config.uses_unity_catalog:
        spark.sql(
            f"CREATE SCHEMA IF NOT EXISTS {quote_identifier(config.catalog or '', config.schema)}"
        )
    in_parallel(lambda table: create_table(spark, table), config.tables(), "create-table")
    register_tables(spark, config)
