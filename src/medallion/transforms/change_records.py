"""Full-row change records of one entity (customers, accounts): how they are keyed and ordered.
The apply-changes block (pipelines/blocks/changes.py) applies them to a table with
:data:`FULL_ROW_SEQUENCE`; their history (transforms/history.py) orders them by
:meth:`ChangeRecords.order_sql`.

Changes of one key are ordered by (``sequence_num``, operation rank, ``updated_at``): on an
equal sequence number a DELETE beats an UPDATE, which beats an INSERT, then the later
``updated_at`` wins. Changes that tie on those three are ordered by their content (the
entity's content columns in turn, a missing value lowest), so the greatest change wins whatever
the order of arrival. The same order decides within a batch and, in the MERGE, across batches.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from medallion.transforms.bronze import kafka_position_columns

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
    position columns when there are any."""
    return validated.where(F.col("reason").isNull()).select(
        *records.change_columns, *kafka_position_columns(validated)
    )
