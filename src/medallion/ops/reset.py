"""Replay: delete a layer's tables (or one table), their streams' checkpoints and everything
downstream, so that the next run rebuilds them from the layer above.

Bronze keeps the full history of the input, so silver and gold can always be rebuilt. Bronze
itself is rebuilt from the input that is still there: the landing folder, or what the topics
still retain. What is downstream is derived from the declared flows (ops/lineage.py): a stream that
writes a reset table is reset whole, with every table it writes, and so is every stream that
reads a reset table. A reset holds the locks of every stream it deletes, so it is refused
while a run of any of them is live (medallion/locks.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyspark.sql import SparkSession

from medallion.config import Config
from medallion.declarations import LAYERS
from medallion.deployment import table_of, tables_of
from medallion.errors import ConfigError
from medallion.locks import stream_locks
from medallion.ops.lineage import downstream
from medallion.sql_names import TableRef
from medallion.storage import delete_file, delete_folder, write_text
from medallion.streams.flows import fusion_head
from medallion.streams.fusion import RESET_MARKER
from medallion.tables import table_exists, unregister_table

log = logging.getLogger(__name__)

RESETTABLE_LAYERS = LAYERS


@dataclass(frozen=True)
class ResetPlan:
    """What a reset deletes: tables, and the checkpoints of the streams that write them."""

    tables: tuple[TableRef, ...]
    streams: tuple[str, ...]
    checkpoints: tuple[str, ...]

    def describe(self) -> str:
        """The plan as lines for a person to confirm."""
        lines = ["tables:"]
        lines += [f"  {t.key} ({t.path or t.qualified_name})" for t in self.tables]
        lines.append("stream checkpoints:")
        lines += [f"  {s} ({c})" for s, c in zip(self.streams, self.checkpoints, strict=True)]
        if any(t.layer == "bronze" for t in self.tables):
            lines.append(
                "bronze is rebuilt from the input still in the landing folder (or still retained "
                "by the topics): input removed since it was ingested is lost for good"
            )
        return "\n".join(lines)


def plan_reset(config: Config, layer: str, table: str | None = None) -> ResetPlan:
    """The tables and checkpoints to delete to rebuild ``layer`` (or one of its tables)."""
    if layer not in RESETTABLE_LAYERS:
        raise ConfigError(f"cannot reset layer {layer!r}: use {', '.join(RESETTABLE_LAYERS)}")
    refs = tables_of(config)
    if table is not None:
        chosen = [config.table(table_of(table).key)]  # ConfigError for an unknown key
        if chosen[0].layer != layer:
            raise ConfigError(f"table {table!r} is not in layer {layer!r}")
    else:
        chosen = [t for t in refs if t.layer == layer]
    flows, keys = downstream([t.key for t in chosen])
    tables = tuple(config.table(k) for k in keys)
    return ResetPlan(
        tables, tuple(f.name for f in flows), tuple(config.checkpoint(f.name) for f in flows)
    )


def execute_reset(spark: SparkSession, config: Config, plan: ResetPlan) -> None:
    """Delete what ``plan`` lists. Tables are dropped from the catalog and their data removed.

    Raises :class:`~medallion.locks.LockHeld` while a run of any of the plan's streams is live.
    """
    with stream_locks(config.checkpoints_folder, plan.streams, "medallion reset"):
        _delete(spark, config, plan)


def _delete(spark: SparkSession, config: Config, plan: ResetPlan) -> None:
    # A stream fused into one that keeps running (silver_events into bronze_events, when bronze
    # stays) rebuilds its tables by catching up from its source, from an empty checkpoint
    # (streams/fusion.py). Until its tables are gone, a marker there stops every run.
    catch_up = [
        s
        for s in plan.streams
        if (head := fusion_head(s)) is not None and head.name not in plan.streams
    ]
    for stream in catch_up:
        checkpoint = config.checkpoint(stream)
        delete_folder(spark, checkpoint)
        write_text(spark, f"{checkpoint}/{RESET_MARKER}", "medallion reset in progress\n")
    for table in plan.tables:
        exists = table_exists(spark, table)
        if table.path is not None:
            if not config.uses_unity_catalog:
                unregister_table(spark, table)
            if exists:
                delete_folder(spark, table.path)
        else:
            spark.sql(f"DROP TABLE IF EXISTS {table.qualified_name}")
        log.info("reset: deleted table %s", table.key)
    for stream, checkpoint in zip(plan.streams, plan.checkpoints, strict=True):
        if stream in catch_up:
            delete_file(spark, f"{checkpoint}/{RESET_MARKER}")
            log.info("reset: %s will catch up from its source at the next run", stream)
        else:
            delete_folder(spark, checkpoint)
            log.info("reset: deleted checkpoint of %s", stream)
    _forget_cached_logs(spark)


def _forget_cached_logs(spark: SparkSession) -> None:
    """Drop this JVM's cached Delta logs: a table deleted and created again starts at version 0."""
    try:
        spark.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    except Exception:  # noqa: BLE001 - Spark Connect has no local JVM, and nothing cached
        log.debug("could not clear the Delta log cache", exc_info=True)
