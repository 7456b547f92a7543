"""Slowly changing dimension type 2 over full-row change records: one row per version of an
entity (a customer, an account), computed from all of its change records, so that the result
does not depend on the order in which they arrived. Pure DataFrame transformations.

A key's changes are taken in silver's order (:meth:`ChangeRecords.order_sql`: sequence number,
then DELETE over UPDATE over INSERT, then ``updated_at``, then content); copies equal in all of
it count once. In that order:

- an INSERT or UPDATE opens a version when none is open, or when a *tracked* column differs
  from the open version's; it closes the open one at its ``updated_at``;
- otherwise (only untracked columns changed, or none) it updates the open version in place, as
  Lakeflow's ``track_history_column_list`` does: the version keeps its ``valid_from``;
- a DELETE closes the open version at its ``updated_at``; the closed row stays, with the
  DELETE's ``sequence_num`` and ``operation``. A DELETE with no open version (the key's first
  change, or a second DELETE) is kept as a row of its own, closed as it opens and without
  content, so that no change is lost.

Each row keeps the changes it absorbed in ``_changes``: a late change in the middle of a key's
history is applied by recomputing that key's rows from ``_changes`` and the new records
(:func:`recompute_keys`), exactly as if every change had arrived at once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from medallion.transforms.change_records import ChangeRecords

VERSION_COLUMNS = ("valid_from", "valid_to", "is_current", "sequence_num", "operation")
# A row's identity within its key: a hash of the change that opened it, which stays the row's
# first change whatever arrives later (a late change in the middle opens a row of its own).
VERSION_ID = "_version_id"
CHANGES_COLUMN = "_changes"


@dataclass(frozen=True)
class History:
    """The history of ``records``; ``tracked`` names the content columns whose change opens a
    new version (every content column when None)."""

    records: ChangeRecords
    tracked: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        unknown = set(self.tracked or ()) - set(self.records.content)
        if unknown:
            known = ", ".join(self.records.content)
            raise ValueError(f"tracked columns {sorted(unknown)} are not among {known}")

    @property
    def tracked_columns(self) -> tuple[str, ...]:
        return self.records.content if self.tracked is None else self.tracked

    @property
    def change_fields(self) -> tuple[str, ...]:
        """What a change is made of, besides its key."""
        return (*self.records.content, "sequence_num", "updated_at", "operation")

    @property
    def row_key(self) -> tuple[str, str]:
        """What identifies a row: the key and ``_version_id`` (a MERGE's match)."""
        return (self.records.key, VERSION_ID)

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns of a history row, in order."""
        return (
            self.records.key,
            *self.records.content,
            *VERSION_COLUMNS,
            VERSION_ID,
            CHANGES_COLUMN,
        )

    def versions(self, changes: DataFrame) -> DataFrame:
        """The history rows of every key in ``changes`` (change records: the key, the content
        columns, ``sequence_num``, ``updated_at``, ``operation``; other columns are ignored)."""
        key = self.records.key
        order = F.expr(self.records.order_sql())
        distinct = changes.select(key, *self.change_fields).distinct()
        in_order = Window.partitionBy(key).orderBy(order)
        is_delete = F.col("operation") == "DELETE"
        after_nothing = F.col("_previous_operation").isNull() | (
            F.col("_previous_operation") == "DELETE"
        )
        tracked = F.struct(*self.tracked_columns)
        steps = (
            distinct.withColumn("_order", order)
            .withColumn("_previous_operation", F.lag("operation").over(in_order))
            .withColumn("_previous_tracked", F.lag(tracked).over(in_order))
            .withColumn(
                "_opens",
                # A DELETE after nothing open is a row of its own; one after a version closes it.
                F.when(is_delete, after_nothing).otherwise(
                    after_nothing | ~tracked.eqNullSafe(F.col("_previous_tracked"))
                ),
            )
            .withColumn("_version", F.sum(F.col("_opens").cast("int")).over(in_order))
        )
        # The order first: array_sort compares structs field by field.
        change = F.struct(F.col("_order"), *self.change_fields)
        rows = steps.groupBy(key, "_version").agg(
            F.array_sort(F.collect_list(change)).alias("_absorbed"),
        )
        first, last = F.col("_absorbed")[0], F.element_at("_absorbed", -1)
        # The content of the last change that is not a DELETE; a DELETE's own row has none.
        contents = F.filter("_absorbed", lambda c: c["operation"] != "DELETE")
        content_of = F.element_at(contents, -1)
        closed_by_delete = (last["operation"] == "DELETE") & (first["operation"] != "DELETE")
        next_start = F.lead(first["updated_at"]).over(
            Window.partitionBy(key).orderBy(first["_order"])
        )
        orphan_delete = first["operation"] == "DELETE"
        valid_to = F.when(orphan_delete | closed_by_delete, last["updated_at"]).otherwise(
            next_start
        )
        return rows.select(
            key,
            *(
                F.when(orphan_delete, F.lit(None)).otherwise(content_of[c]).alias(c)
                for c in self.records.content
            ),
            first["updated_at"].alias("valid_from"),
            valid_to.alias("valid_to"),
            valid_to.isNull().alias("is_current"),
            last["sequence_num"].alias("sequence_num"),
            last["operation"].alias("operation"),
            F.xxhash64(first["_order"]).alias(VERSION_ID),
            F.transform(
                "_absorbed", lambda c: F.struct(*(c[f].alias(f) for f in self.change_fields))
            ).alias(CHANGES_COLUMN),
        )

    def changes_of(self, history: DataFrame) -> DataFrame:
        """The change records that ``history``'s rows absorbed, one row each."""
        key = self.records.key
        absorbed = history.select(key, F.explode(CHANGES_COLUMN).alias("_change"))
        return absorbed.select(key, *(F.col("_change")[f].alias(f) for f in self.change_fields))

    def rows_of_keys(self, history: DataFrame, changes: DataFrame) -> DataFrame:
        """The rows of ``history`` whose key is among those of ``changes``."""
        key = self.records.key
        return history.join(changes.select(key).distinct(), key, "left_semi")

    def recompute_keys(self, history: DataFrame, changes: DataFrame) -> DataFrame:
        """The rows of the keys in ``changes``, recomputed from what their rows in ``history``
        absorbed and the new ``changes``: the rows that replace every row of those keys."""
        return self.recompute(self.rows_of_keys(history, changes), changes)

    def recompute(self, theirs: DataFrame, changes: DataFrame) -> DataFrame:
        """:meth:`recompute_keys` from ``theirs``, the history rows of ``changes``' keys."""
        fields = [self.records.key, *self.change_fields]
        return self.versions(self.changes_of(theirs).select(*fields).union(changes.select(*fields)))


def valid_at(history: DataFrame, at: Column) -> Column:
    """A condition, for a join of ``history`` rows on their key with rows of a time ``at``: the
    version valid then (``valid_from`` <= ``at`` < ``valid_to``), as in "the customer's segment
    at the time of each purchase"."""
    valid_to = history["valid_to"]
    return (history["valid_from"] <= at) & (valid_to.isNull() | (at < valid_to))


def latest_change_at(
    history: History, changes: DataFrame, rows: DataFrame, at: str, columns: tuple[str, ...]
) -> DataFrame:
    """``rows`` (which hold the key and a time column ``at``) with ``columns`` of the change in
    force at that time: among the key's ``changes`` with ``updated_at`` <= ``at``, the greatest
    in silver's order. Columns are NULL where there is none or it is a DELETE."""
    key = history.records.key
    candidates = changes.select(
        F.col(key).alias("_c_key"),
        F.struct(
            F.expr(history.records.order_sql()).alias("_order"),
            "updated_at",
            "operation",
            *columns,
        ).alias("_c"),
    )
    numbered = rows.withColumn("_row", F.monotonically_increasing_id())
    joined = numbered.join(
        candidates,
        (F.col(key) == F.col("_c_key")) & (F.col("_c.updated_at") <= F.col(at)),
        "left",
    )
    best = Window.partitionBy("_row").orderBy(F.col("_c._order").desc_nulls_last())
    deleted = F.col("_c.operation") == "DELETE"
    chosen = joined.withColumn("_rank", F.row_number().over(best)).where("_rank = 1")
    return chosen.select(
        *numbered.columns,
        *(F.when(deleted, F.lit(None)).otherwise(F.col(f"_c.{c}")).alias(c) for c in columns),
    ).drop("_row")


def history_schema(key: str, content: str) -> str:
    """The DDL of a history table: ``key`` (``customer_id STRING``) and the ``content`` columns
    (``name STRING, country STRING``), then the version columns and the changes each row
    absorbed. Pure text, for a table's declaration.

    >>> history_schema("id STRING", "a STRING").split(", _changes")[0]
    'id STRING NOT NULL, a STRING, valid_from TIMESTAMP, valid_to TIMESTAMP, is_current BOOLEAN, sequence_num BIGINT NOT NULL, operation STRING, _version_id BIGINT NOT NULL'
    """
    fields = f"{content}, sequence_num BIGINT, updated_at TIMESTAMP, operation STRING"
    change = ", ".join(f"{name}: {kind}" for name, kind in _pairs(fields))
    return (
        f"{key} NOT NULL, {content}, valid_from TIMESTAMP, valid_to TIMESTAMP, "
        "is_current BOOLEAN, sequence_num BIGINT NOT NULL, operation STRING, "
        f"{VERSION_ID} BIGINT NOT NULL, {CHANGES_COLUMN} ARRAY<STRUCT<{change}>>"
    )


def _pairs(ddl: str) -> list[tuple[str, str]]:
    """(name, type) of each column of a DDL list of plain types (``DECIMAL(18,4)`` included)."""
    parts = re.split(r",(?![^()]*\))", ddl)
    return [tuple(part.strip().split(" ", 1)) for part in parts]  # type: ignore[misc]
