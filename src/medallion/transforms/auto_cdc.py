"""Change records of any shape applied to a table, as Lakeflow's AUTO CDC applies them: pure
DataFrame transformations (pipelines/blocks/changes.py runs them by MERGE, once per batch).

A change is a row holding the table's key columns and stored columns. Its sequence
(``_sequence``) is any orderable value a SQL expression gives (a number, a timestamp, a
struct); it deletes its key when the deletes expression holds (``_delete``), and it truncates
the table (every row not newer than it) when the truncates expression holds (``_truncate``).

Changes are ordered by (sequence, a delete over an upsert, the stored columns that do not
start with ``_``): on an equal sequence a delete wins, and two different changes never tie,
so the same changes give the same table whatever their order of arrival and however they
are cut into batches. Changes equal in all of that are left to arrival order.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from medallion.transforms.bronze import arrival_order, kafka_position_columns

SEQUENCE, DELETE, TRUNCATE, ORDER, ACTION = "_sequence", "_delete", "_truncate", "_order", "_action"
START, END = "__START_AT", "__END_AT"
VERSION_ID, CHANGES = "_version_id", "_changes"


@dataclass(frozen=True)
class ChangeShape:
    """How change rows apply to a table: its ``keys``, the ``columns`` it stores (keys
    included, in the table's order), and SQL over a change row for its ``sequence_by``, whether
    it ``deletes`` and whether it ``truncates`` (None: never). ``sequence_by`` reads only stored
    columns, so that a stored row's sequence can be compared with a change's."""

    keys: tuple[str, ...]
    columns: tuple[str, ...]
    sequence_by: str
    deletes: str | None = None
    truncates: str | None = None

    @property
    def content(self) -> tuple[str, ...]:
        """The stored columns besides the keys."""
        return tuple(c for c in self.columns if c not in self.keys)

    def order(self) -> Column:
        """The order of a change row (with ``_sequence`` and ``_delete``): see the module."""
        compared = [c for c in self.content if not c.startswith("_")]
        return F.struct(F.col(SEQUENCE), F.col(DELETE), *map(F.col, compared))

    def changes(self, rows: DataFrame) -> DataFrame:
        """``rows`` as changes: the stored columns, ``_sequence``, ``_delete``, ``_truncate``
        and ``_order`` (and the arrival columns, for ties)."""
        flag = lambda sql: F.coalesce(F.expr(sql), F.lit(False)) if sql else F.lit(False)  # noqa: E731
        arrival = ("_ingested_at", *kafka_position_columns(rows), "_source_file")
        changes = rows.select(
            *self.columns,
            *(c for c in arrival if c in rows.columns and c not in self.columns),
            F.expr(self.sequence_by).alias(SEQUENCE),
            (flag(self.deletes) | flag(self.truncates)).alias(DELETE),  # a truncation deletes
            flag(self.truncates).alias(TRUNCATE),
        )
        return changes.withColumn(ORDER, self.order())

    def stored(self, rows: DataFrame, deleted: bool) -> DataFrame:
        """Stored rows (a table's, or its tombstones') with their ``_order``."""
        sequenced = rows.withColumn(SEQUENCE, F.expr(self.sequence_by))
        return sequenced.withColumn(DELETE, F.lit(deleted)).withColumn(ORDER, self.order())

    def newest_per_key(self, changes: DataFrame) -> DataFrame:
        """Each key's greatest change (a MERGE takes one source row per target row)."""
        ties = arrival_order(changes) if "_source_file" in changes.columns else []
        newest = Window.partitionBy(*self.keys).orderBy(F.col(ORDER).desc(), *ties)
        ranked = changes.withColumn("_rank", F.row_number().over(newest))
        return ranked.where("_rank = 1").drop("_rank")


def scd1_plan(
    shape: ChangeShape,
    changes: DataFrame,
    state: DataFrame,
    tombstones: DataFrame,
    truncating: bool,
) -> tuple[DataFrame, DataFrame]:
    """What a batch of ``changes`` does to a type 1 table holding ``state``, given its
    ``tombstones`` (the newest delete of each deleted key, and truncations without a key):

    - the rows to MERGE into the table on the keys, each with ``_action``: ``upsert`` (its
      key's newest change, newer than the table's row, its delete and any truncation) or
      ``delete`` (a newer delete; with ``truncating``, also every row not newer than the batch's
      truncation);
    - the rows to MERGE into the tombstones: each key's newest delete that is newer than its
      recorded one (even one a newer change of the batch overrides), and the batch's newest
      truncation, without a key.
    """
    # A recorded delete is compared by its sequence alone: a tombstone need not keep content.
    keyed, cut = changes.withColumn("_sequenced", _sequenced()).where(~F.col(TRUNCATE)), None
    recorded = shape.stored(tombstones, True).withColumn("_sequenced", _sequenced())
    if shape.truncates:
        truncations = recorded.where(_no_key(shape)).select("_sequenced")
        cuts = truncations.unionByName(
            changes.where(F.col(TRUNCATE)).select(_sequenced().alias("_sequenced"))
        )
        cut = cuts.agg(F.max("_sequenced").alias("_cut"))
        keyed = _newer_than_cut(keyed, "_sequenced", cut)
    deleted = recorded.where(~_no_key(shape)).select(
        *shape.keys, F.col("_sequenced").alias("_deleted")
    )
    fresh = keyed.join(deleted, list(shape.keys), "left")
    fresh = fresh.where(F.col("_deleted").isNull() | (F.col("_sequenced") > F.col("_deleted")))
    current = shape.stored(state, False).select(
        *shape.keys, F.col(ORDER).alias("_current"), _sequenced().alias("_current_sequenced")
    )
    if truncating:
        current = _newer_than_cut(current, "_current_sequenced", cut)
    newest = shape.newest_per_key(fresh).join(current, list(shape.keys), "left")
    newer = F.col("_current").isNull() | (F.col(ORDER) > F.col("_current"))
    action = F.when(newer, F.when(F.col(DELETE), "delete").otherwise("upsert"))
    rows = newest.select(*shape.columns, action.alias(ACTION)).where(F.col(ACTION).isNotNull())
    if truncating:
        stored = shape.stored(state, False).crossJoin(cut)
        gone = stored.where(_sequenced() <= F.col("_cut")).select(*shape.keys)
        gone = gone.join(rows.select(*shape.keys), list(shape.keys), "left_anti")
        rows = rows.unionByName(gone.withColumn(ACTION, F.lit("delete")), allowMissingColumns=True)
    deletes = shape.newest_per_key(fresh.where(F.col(DELETE))).select(*shape.columns)
    if truncating:
        last = changes.where(F.col(TRUNCATE)).orderBy(F.col(ORDER).desc()).limit(1)
        no_key = last.select(*(F.lit(None).alias(k) for k in shape.keys), *shape.content)
        deletes = deletes.unionByName(no_key.select(*shape.columns))
    return rows, deletes


def _sequenced() -> Column:
    return F.struct(F.col(SEQUENCE), F.col(DELETE))


def _newer_than_cut(rows: DataFrame, order: str, cut: DataFrame | None) -> DataFrame:
    if cut is None:
        return rows
    newer = F.col("_cut").isNull() | (F.col(order) > F.col("_cut"))
    return rows.crossJoin(cut).where(newer).drop("_cut", "_current_sequenced")


def _no_key(shape: ChangeShape) -> Column:
    return F.expr(" AND ".join(f"`{k}` IS NULL" for k in shape.keys))


@dataclass(frozen=True)
class Versions:
    """A type 2 table of ``shape``'s changes: one row per version of each key, opened by the
    change that made it (``__START_AT``, its sequence) and closed by the next version's start
    or a delete (``__END_AT``; NULL while current). A change to a ``tracked`` column opens a
    version; a change to others only updates the open one in place. A delete with no open
    version is kept as a row of its own, closed as it opens and without content, so that a
    late, older change still finds it. Each row keeps the changes it absorbed (``_changes``):
    a late change is applied by recomputing its key's rows, exactly as if every change had
    arrived at once."""

    shape: ChangeShape
    tracked: tuple[str, ...]

    @property
    def columns(self) -> tuple[str, ...]:
        return (*self.shape.columns, START, END, VERSION_ID, CHANGES)

    @property
    def row_key(self) -> tuple[str, ...]:
        """What identifies a row (the MERGE's match): the keys and ``_version_id``."""
        return (*self.shape.keys, VERSION_ID)

    @property
    def change_fields(self) -> tuple[str, ...]:
        return (*self.shape.content, SEQUENCE, DELETE)

    def rows_of_keys(self, table_rows: DataFrame, changes: DataFrame) -> DataFrame:
        """The rows of ``table_rows`` whose key is among those of ``changes``."""
        keys = list(self.shape.keys)
        return table_rows.join(changes.select(*keys).distinct(), keys, "left_semi")

    def recompute(self, theirs: DataFrame, changes: DataFrame) -> DataFrame:
        """The rows of ``changes``' keys from what ``theirs`` (their rows) absorbed and them."""
        fields = [*self.shape.keys, *self.change_fields]
        absorbed = theirs.select(*self.shape.keys, F.explode(CHANGES).alias("_c"))
        before = absorbed.select(
            *self.shape.keys, *(F.col("_c")[f].alias(f) for f in fields[len(self.shape.keys) :])
        )
        return self.versions(before.unionByName(changes.select(*fields)))

    def versions(self, changes: DataFrame) -> DataFrame:
        """The rows of every key of ``changes`` (keys, content, ``_sequence``, ``_delete``)."""
        keys, fields = list(self.shape.keys), self.change_fields
        distinct = changes.select(*keys, *fields).distinct().withColumn(ORDER, self.shape.order())
        in_order = Window.partitionBy(*keys).orderBy(ORDER)
        tracked = F.struct(*self.tracked)
        after_nothing = F.col("_previous_delete").isNull() | F.col("_previous_delete")
        steps = (
            distinct.withColumn("_previous_delete", F.lag(DELETE).over(in_order))
            .withColumn("_previous_tracked", F.lag(tracked).over(in_order))
            .withColumn(
                "_opens",
                F.when(F.col(DELETE), after_nothing).otherwise(
                    after_nothing | ~tracked.eqNullSafe(F.col("_previous_tracked"))
                ),
            )
            .withColumn("_version", F.sum(F.col("_opens").cast("int")).over(in_order))
        )
        # The order first: array_sort compares structs field by field.
        change = F.struct(F.col(ORDER), *fields)
        rows = steps.groupBy(*keys, "_version").agg(
            F.array_sort(F.collect_list(change)).alias("_absorbed")
        )
        first, last = F.col("_absorbed")[0], F.element_at("_absorbed", -1)
        content = F.element_at(F.filter("_absorbed", lambda c: ~c[DELETE]), -1)
        orphan = first[DELETE]
        next_start = F.lead(first[SEQUENCE]).over(Window.partitionBy(*keys).orderBy(first[ORDER]))
        end = F.when(orphan | last[DELETE], last[SEQUENCE]).otherwise(next_start)
        return rows.select(
            *keys,
            *(
                F.when(orphan, F.lit(None)).otherwise(content[c]).alias(c)
                for c in self.shape.content
            ),
            first[SEQUENCE].alias(START),
            end.alias(END),
            F.xxhash64(first[ORDER]).alias(VERSION_ID),
            F.transform("_absorbed", lambda c: F.struct(*(c[f].alias(f) for f in fields))).alias(
                CHANGES
            ),
        )
