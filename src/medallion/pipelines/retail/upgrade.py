"""Bringing a lake written by an earlier medallion up to the tables this one keeps.

``gold/hourly_product_users`` holds the (hour, product, user) keys that gold's
``unique_users`` counts. A lake from before it has gold rows but no keys: they are filled
once, from silver exactly as far as the gold stream has read it (its checkpoint's position),
before the stream resumes and adds to both.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession

from medallion.config import Config
from medallion.delta_log import commit_actions
from medallion.errors import PipelineError
from medallion.pipelines.retail.transforms.gold import hourly_user_keys
from medallion.sql_names import TableRef
from medallion.streams.checkpoint_files import DeltaPosition, delta_position
from medallion.streams.sinks import append_batch
from medallion.tables import holds_data, read_table

log = logging.getLogger(__name__)

_EVENT_COLUMNS = ("user_id", "product_id", "event_timestamp", "event_date")
# Delta's offset index for "every file of this version read" (DeltaSourceOffset.END_INDEX).
_END_INDEX_FLOOR = 2**62


def _version_files(spark: SparkSession, table: TableRef, version: int, count: int) -> list[str]:
    """The first ``count`` data files that commit ``version`` added, in the order a Delta
    source indexes them (the commit's ``add`` actions with ``dataChange``)."""
    assert table.path is not None
    added = [
        f"{table.path}/{action['add']['path']}"
        for action in commit_actions(spark, table, version)
        if "add" in action and action["add"].get("dataChange", True)
    ]
    return added[:count]


def rows_read(
    spark: SparkSession,
    silver: TableRef,
    position: DeltaPosition,
    columns: Sequence[str] = _EVENT_COLUMNS,
    *,
    stream: str,
) -> DataFrame | None:
    """The ``columns`` of the silver rows that the Delta-source stream ``stream``, standing at
    ``position``, has read (None: none)."""
    if position.starting:
        if position.index < 0:
            return None
        if position.index >= _END_INDEX_FLOOR:
            return read_table(spark, silver, position.version)
        raise PipelineError(
            f"stream '{stream}' stopped half-way through its first snapshot of "
            f"silver/events (version {position.version}), before the table of what it "
            "counted existed, so that cannot be listed: run "
            "`medallion reset --layer gold` to rebuild gold from silver"
        )
    rows = read_table(spark, silver, position.version - 1) if position.version > 0 else None
    if position.index < 0:
        return rows
    if silver.path is None:
        raise PipelineError(
            f"stream '{stream}' stopped inside silver/events version "
            f"{position.version}; run `medallion reset --layer gold` to rebuild gold from silver"
        )
    files = _version_files(spark, silver, position.version, position.index + 1)
    partial = spark.read.parquet(*files).select(*columns)
    return partial if rows is None else rows.select(*columns).unionByName(partial)


def backfill_hourly_users(spark: SparkSession, config: Config, stream: str) -> None:
    """Fill ``gold/hourly_product_users`` for a lake whose gold was built without it.

    Does nothing when the key table holds rows or gold holds none. The keys come from the
    silver rows the gold stream ``stream`` has read, so that gold and its keys agree when the stream
    resumes; one append, so a crash leaves the table empty and the next run fills it again.
    """
    users = config.table("gold/hourly_product_users")
    gold = config.table("gold/hourly_product_metrics")
    if holds_data(spark, users) or not holds_data(spark, gold):
        return
    position = delta_position(config.checkpoint(stream))
    if position is None:
        return
    rows = rows_read(spark, config.table("silver/events"), position, stream=stream)
    if rows is None:
        return
    log.info(
        "gold/hourly_product_users: filling it from silver/events up to version %d, where %s "
        "stands (a lake from before the table)",
        position.version,
        stream,
    )
    append_batch(hourly_user_keys(rows.select(*_EVENT_COLUMNS)), users)
