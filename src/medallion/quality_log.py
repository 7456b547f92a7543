"""Where a lake keeps its data-quality log: ``<lake>/_system/data_quality`` (streams/quality.py
writes it, ``medallion status`` and the dashboards read it)."""

from __future__ import annotations

from medallion.config import Config
from medallion.sql_names import TableRef

QUALITY_TABLE_KEY = "_system/data_quality"
QUALITY_SCHEMA = (
    "stream STRING, batch_id BIGINT, dataset STRING, table_name STRING, table_version BIGINT, "
    "rule STRING, action STRING, passed BIGINT, failed BIGINT, recorded_at TIMESTAMP"
)
QUALITY_PROPERTIES = {"delta.appendOnly": "true", "delta.checkpointInterval": "100"}


def quality_table(config: Config) -> TableRef:
    """The data-quality log of the lake of ``config``."""
    return config.system_table(QUALITY_TABLE_KEY.removeprefix("_system/"))


def quality_table_spec(config: Config) -> tuple[TableRef, str, dict[str, str]]:
    """(table, columns, properties), for :func:`medallion.tables.ensure_tables`."""
    return quality_table(config), QUALITY_SCHEMA, dict(QUALITY_PROPERTIES)
