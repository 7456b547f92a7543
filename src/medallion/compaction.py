"""Compaction of the tables' small files by medallion, in place of open-source Delta's auto
compaction.

Delta's auto compaction (``delta.autoOptimize.autoCompact``) runs inside the commit that
triggers it, and in a new JVM it compacts as soon as two small files exist: every available-now
run paid a synchronous OPTIMIZE of every table it wrote, a rewrite of all the table's small
files that grows with its history, and optimized writes added a shuffle to every batch. Local
sessions turn both off (``LOCAL_SPARK_CONF`` in session.py); the runner compacts a table once
:data:`MIN_SMALL_FILES` files have piled up instead, after an available-now run and in the
background of a streaming run. Where auto compaction is left on (a Databricks cluster, whose
tables keep their ``autoOptimize`` properties), this does nothing.

OPTIMIZE commits with ``dataChange=false``: streams reading a compacted table skip the commit,
and writers that lose a race with it retry (medallion/conflicts.py).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from pyspark.sql import SparkSession

from medallion.conflicts import is_write_conflict, retry_on_conflict
from medallion.sql_names import TableRef
from medallion.tables import file_stats

log = logging.getLogger(__name__)

# Compact once this many files hold less than SMALL_FILE_BYTES each on average (the default of
# Delta's spark.databricks.delta.autoCompact.minNumFiles).
MIN_SMALL_FILES = 50
SMALL_FILE_BYTES = 32 * 1024 * 1024
AUTO_COMPACT_CONF = "spark.databricks.delta.autoCompact.enabled"


def owns_compaction(spark: SparkSession) -> bool:
    """True when the session has Delta's auto compaction turned off, so medallion compacts."""
    try:
        return spark.conf.get(AUTO_COMPACT_CONF, None) == "false"
    except Exception:  # noqa: BLE001 - a Connect server that does not know the conf yet
        return False


def is_fragmented(spark: SparkSession, table: TableRef) -> bool:
    """True when the table has at least MIN_SMALL_FILES files of SMALL_FILE_BYTES or less on
    average."""
    files, size = file_stats(spark, table)
    return files >= MIN_SMALL_FILES and size <= files * SMALL_FILE_BYTES


def compact(spark: SparkSession, table: TableRef) -> bool:
    """Bin-pack the table's small files (files over ``optimize.minFileSize`` stay as they are);
    False when concurrent writers kept winning the race (the next check tries again)."""
    statement = f"OPTIMIZE {table.sql_name}"
    try:
        retry_on_conflict(lambda: spark.sql(statement).collect(), statement, 4, 1.0)
    except Exception as error:
        if not is_write_conflict(error):
            raise
        log.info("%s: compaction deferred, concurrent commits kept winning", table.key)
        return False
    return True


def compact_fragmented(spark: SparkSession, tables: Sequence[TableRef]) -> list[str]:
    """Compact each of ``tables`` that :func:`is_fragmented`, when medallion owns compaction;
    the keys of the tables compacted."""
    if not owns_compaction(spark):
        return []
    compacted = []
    for table in tables:
        if is_fragmented(spark, table) and compact(spark, table):
            log.info("%s: compacted its small files", table.key)
            compacted.append(table.key)
    return compacted


class BackgroundCompactor(threading.Thread):
    """Runs :func:`compact_fragmented` every ``every_seconds`` beside a streaming run, until
    :meth:`finish`; a failed check is logged and tried again at the next one."""

    def __init__(
        self, spark: SparkSession, tables: Sequence[TableRef], every_seconds: float
    ) -> None:
        super().__init__(name="medallion-compactor", daemon=True)
        self.spark, self.tables, self.every_seconds = spark, list(tables), every_seconds
        self._finished = threading.Event()

    def run(self) -> None:
        while not self._finished.wait(self.every_seconds):
            try:
                compact_fragmented(self.spark, self.tables)
            except Exception as error:  # noqa: BLE001 - compaction never stops the pipeline
                log.warning("compaction check failed (tried again later): %s", error)

    def finish(self, timeout: float) -> None:
        """Stop checking; wait up to ``timeout`` seconds for a compaction under way."""
        self._finished.set()
        self.join(timeout)
