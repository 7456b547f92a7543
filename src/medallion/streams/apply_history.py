"""Keep a history table (SCD type 2, transforms/history.py) by MERGE: a batch of change records
replaces the rows of the keys it touches with their rows recomputed from every change those
keys have had, in one commit, once per batch (streams/exactly_once.py)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from medallion.sql_names import TableRef
from medallion.streams.exactly_once import BatchWrites
from medallion.tables import read_table
from medallion.transforms.history import History

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
    return writes.merge(table, rows, history.row_key, history_clauses(history), app_id)
