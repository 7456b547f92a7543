"""Keep a history table (SCD type 2, transforms/history.py) by MERGE: a batch of change records
replaces the rows of the keys it touches with their rows recomputed from every change those
keys have had, in one commit, once per batch (streams/exactly_once.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.config import Config
from medallion.deployment import columns_setting
from medallion.pipeline_settings import ColumnsSetting
from medallion.sql_names import TableRef
from medallion.streams.exactly_once import BatchWrites
from medallion.streams.sinks import append_batch
from medallion.tables import holds_data, read_table
from medallion.transforms.change_records import ChangeRecords, valid_changes
from medallion.transforms.history import History

log = logging.getLogger(__name__)

_ACTION = "_action"


def history_clauses(history: History) -> str:
    """The MERGE clauses, on (key, ``_version_id``): a row the recomputation no longer has is
    deleted, a row whose content it changed is updated, a new one inserted; an unchanged row is
    left alone (no rewrite, no Change Data Feed row)."""
    columns = history.columns
    changed = " OR ".join(f"NOT (t.`{c}` <=> s.`{c}`)" for c in columns)
    return f"""
        WHEN MATCHED AND s.{_ACTION} = 'delete' THEN DELETE
        WHEN MATCHED AND ({changed}) THEN UPDATE SET {", ".join(f"t.`{c}` = s.`{c}`" for c in columns)}
        WHEN NOT MATCHED AND s.{_ACTION} = 'upsert' THEN
            INSERT ({", ".join(f"`{c}`" for c in columns)})
            VALUES ({", ".join(f"s.`{c}`" for c in columns)})
    """


def history_merge_rows(history: History, table_rows: DataFrame, changes: DataFrame) -> DataFrame:
    """The MERGE's source: the recomputed rows of the keys in ``changes`` (``upsert``), and the
    rows ``table_rows`` holds of those keys that the recomputation does not (``delete``)."""
    keys = list(history.row_key)
    theirs = history.rows_of_keys(table_rows, changes).select(*history.columns)
    recomputed = history.recompute(theirs, changes).select(*history.columns)
    gone = theirs.join(recomputed.select(*keys), keys, "left_anti")
    return recomputed.withColumn(_ACTION, F.lit("upsert")).unionByName(
        gone.withColumn(_ACTION, F.lit("delete"))
    )


def apply_history(
    writes: BatchWrites, table: TableRef, history: History, changes: DataFrame, app_id: str
) -> bool:
    """Apply the valid change records ``changes`` to the history ``table``, unless this batch
    did before; True when it merged."""
    rows = history_merge_rows(history, read_table(writes.spark, table), changes)
    inserted = rows.where(F.col(_ACTION) == "upsert").select(*history.columns)
    clauses = history_clauses(history)
    return writes.merge(table, rows, history.row_key, clauses, app_id, into_empty=inserted)


@dataclass(frozen=True)
class KeptHistory:
    """A history table kept beside a state table (SCD type 2, transforms/history.py):
    ``table_key``, from the change ``records`` of ``source_key`` (the bronze table the stream
    reads), with the content columns the pipeline setting ``tracked_setting`` names opening new
    versions."""

    table_key: str
    source_key: str
    tracked_setting: str
    records: ChangeRecords | None = None

    def setting(self, records: ChangeRecords | None = None) -> ColumnsSetting:
        """The pipeline setting of the tracked columns, for ``Pipeline(settings=...)``."""
        records = records or self.records
        assert records is not None
        return ColumnsSetting(
            self.tracked_setting,
            records.content,
            f"the columns whose change opens a new version in {self.table_key}; a change to "
            "another updates the version in place",
        )

    def of(self, config: Config, records: ChangeRecords | None = None) -> HistoryTarget:
        """This history in ``config``'s lake."""
        records = records or self.records
        assert records is not None
        history = History(records, columns_setting(config, self.tracked_setting))
        return HistoryTarget(config.table(self.table_key), history, config.table(self.source_key))


class HistoryTarget:
    """A :class:`KeptHistory` in one lake: its ``table``, its ``history`` and the ``source``
    table of its change records."""

    def __init__(self, table: TableRef, history: History, source: TableRef) -> None:
        self.table, self.history, self.source = table, history, source
        self._checked = False

    def fill_once(
        self,
        spark: SparkSession,
        state_tables: tuple[TableRef, ...],
        validate: Callable[[DataFrame], DataFrame],
    ) -> None:
        """Fill an empty history from every change record of the source, once per stream
        start, when the state tables hold data: a lake from before the history. One commit,
        so a crash leaves the table empty and the next batch fills it again; a change the
        stream applies afterwards again is a duplicate, which changes nothing."""
        if self._checked:
            return
        self._checked = True
        if holds_data(spark, self.table) or not any(holds_data(spark, t) for t in state_tables):
            return
        source = read_table(spark, self.source)
        changes = valid_changes(self.history.records, validate(source))
        log.info("%s: filling it from %s (a lake from before it)", self.table.key, self.source.key)
        append_batch(self.history.versions(changes), self.table)
