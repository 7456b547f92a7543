"""Full-row change records of one entity (customers, accounts): how they are keyed and ordered,
and each key's newest change. Pure DataFrame transformations; streams/apply_changes.py applies
them to a table by MERGE.

Changes of one key are ordered by (``sequence_num``, operation rank, ``updated_at``): on an
equal sequence number a DELETE beats an UPDATE, which beats an INSERT, then the later
``updated_at`` wins. Changes that tie on those three are ordered by their content (the
entity's content columns in turn, a missing value lowest), so the greatest change wins whatever
the order of arrival. The same order decides within a batch and, in the MERGE, across batches.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from medallion.transforms.bronze import arrival_order, kafka_position_columns

_OPERATION_RANK_SQL = "CASE {a}operation WHEN 'DELETE' THEN 3 WHEN 'UPDATE' THEN 2 ELSE 1 END"
# The same order as the ``sequence_by`` of an apply-changes block (pipelines/blocks/changes.py)
# over full rows: a tombstone, which keeps no operation, ranks as the DELETE it records.
FULL_ROW_SEQUENCE = (
    "named_struct('seq', sequence_num, 'rank', "
    "CASE operation WHEN 'UPDATE' THEN 2 WHEN 'INSERT' THEN 1 ELSE 3 END, 'at', updated_at)"
)


@dataclass(frozen=True)
class ChangeRecords:
    """The change records of one entity: its key column and its content columns, in the order
    that breaks ties between changes with the same sequence key."""

    key: str
    content: tuple[str, ...]

    @property
    def state_columns(self) -> tuple[str, ...]:
        """The columns of the entity's current state: key, content, sequence key."""
        return (self.key, *self.content, "sequence_num", "updated_at")

    @property
    def change_columns(self) -> tuple[str, ...]:
        """The columns of a valid change, and of the state table."""
        return (*self.state_columns, "operation", "_ingested_at", "_source_file")

    @property
    def quarantine_columns(self) -> tuple[str, ...]:
        return (self.key, "reason", "_raw", "_source_file", "_ingested_at")

    @property
    def tombstone_columns(self) -> tuple[str, ...]:
        return (self.key, "sequence_num", "updated_at", "_ingested_at")

    def order_sql(self, alias: str = "") -> str:
        """SQL for the ordering key of a change, for comparisons such as ``s.key > t.key``:
        :func:`sequence_order_sql`, then the content columns, so that two different changes
        never tie. (Spark orders a NULL field of a struct below any value.)"""
        a = f"{alias}." if alias else ""
        content = ", ".join(f"'{c}', {a}{c}" for c in self.content)
        return f"named_struct('key', {sequence_order_sql(alias)}, {content})"


def sequence_order_sql(alias: str = "") -> str:
    """SQL for (``sequence_num``, operation rank, ``updated_at``): the part of the ordering key
    that a tombstone (a DELETE without its content) can be compared with."""
    a = f"{alias}." if alias else ""
    rank = _OPERATION_RANK_SQL.format(a=a)
    return f"named_struct('seq', {a}sequence_num, 'rank', {rank}, 'at', {a}updated_at)"


def valid_changes(records: ChangeRecords, validated: DataFrame) -> DataFrame:
    """The valid rows of a validation (``reason`` NULL), as change records, plus the Kafka
    position columns when there are any (:func:`latest_change_per_key` orders by them and drops
    them)."""
    return validated.where(F.col("reason").isNull()).select(
        *records.change_columns, *kafka_position_columns(validated)
    )


def quarantined_changes(records: ChangeRecords, validated: DataFrame) -> DataFrame:
    """The invalid rows of a validation, with their reason and raw line."""
    return validated.where(F.col("reason").isNotNull()).select(*records.quarantine_columns)


def latest_change_per_key(records: ChangeRecords, changes: DataFrame) -> DataFrame:
    """One change per key: the greatest by :meth:`ChangeRecords.order_sql`. Only changes equal
    in all of it, which carry the same values, are left to arrival order (see
    ``arrival_order``): the first one's ``_ingested_at`` and ``_source_file`` are kept.

    A MERGE fails when several source rows match one target row, so every batch goes through
    this first.
    """
    newest = Window.partitionBy(records.key).orderBy(
        F.expr(records.order_sql()).desc(), *arrival_order(changes)
    )
    ranked = changes.withColumn("_rank", F.row_number().over(newest)).where("_rank = 1")
    return ranked.drop("_rank", *kafka_position_columns(changes))


def newer_than_tombstones(
    records: ChangeRecords, changes: DataFrame, tombstones: DataFrame
) -> DataFrame:
    """Drop changes that are not newer than their key's recorded DELETE.

    A tombstone keeps no content, so it is compared by :func:`sequence_order_sql` only: a DELETE
    that ties with it on (``sequence_num``, ``updated_at``) is not newer, whatever its content.
    """
    deleted = tombstones.select(
        records.key,
        F.expr("named_struct('seq', sequence_num, 'rank', 3, 'at', updated_at)").alias(
            "_tombstone_key"
        ),
    )
    newer = F.col("_tombstone_key").isNull() | (
        F.expr(sequence_order_sql()) > F.col("_tombstone_key")
    )
    return changes.join(deleted, records.key, "left").where(newer).drop("_tombstone_key")
