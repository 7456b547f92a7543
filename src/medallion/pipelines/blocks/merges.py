"""Blocks that MERGE each batch into one table: the latest row per key, and exact grouped
aggregates."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from medallion.config import Config
from medallion.declarations import (
    Flow,
)
from medallion.sql_names import quote_identifier, validate_identifier
from medallion.streams.exactly_once import MergingBatches


@dataclass(frozen=True)
class LatestPerKey:
    """One row per ``keys`` in the flow's table: each batch's newest row per key (by
    ``order_by``) merged over the table's only when it is newer, so a late, older row never
    replaces a newer one. The table keeps the declared columns of the source's rows."""

    keys: tuple[str, ...]
    order_by: str

    def __post_init__(self) -> None:
        for name in (*self.keys, self.order_by):
            validate_identifier(name, "column")

    def newest(self, rows: DataFrame) -> DataFrame:
        """Each key's newest row among ``rows``."""
        order = Window.partitionBy(*self.keys).orderBy(F.desc(self.order_by))
        ranked = rows.withColumn("_newest", F.row_number().over(order))
        return ranked.where("_newest = 1").drop("_newest")

    def __call__(self, config: Config, flow: Flow, checkpoint: str, stream: str | None = None):
        order = quote_identifier(self.order_by)
        newer = f"WHEN MATCHED AND s.{order} > t.{order} THEN UPDATE SET * "
        clauses = newer + "WHEN NOT MATCHED THEN INSERT *"
        merging = _into_declared(flow, self.newest, self.keys, clauses)
        return merging(config, flow, checkpoint, stream)


@dataclass(frozen=True)
class Measure:
    """One aggregate column of an :class:`IncrementalAggregate`: ``kind`` is ``count`` (rows),
    ``sum``, ``min`` or ``max`` of ``column``, cast to ``cast`` when given."""

    name: str
    kind: str
    column: str | None = None
    cast: str | None = None

    def __post_init__(self) -> None:
        validate_identifier(self.name, "measure")
        if self.kind not in _MERGED:
            raise ValueError(f"measure {self.name}: kind is one of {sorted(_MERGED)}")
        if (self.column is None) != (self.kind == "count"):
            raise ValueError(f"measure {self.name}: a count takes no column, the others one")

    def aggregate(self, sign: Column | None = None) -> Column:
        """The measure over a batch's rows; with ``sign`` (1 or -1 per row: a change feed's
        rows added or taken away), a count or sum of the signed rows."""
        if sign is not None and self.kind in ("count", "sum"):
            value = F.sum(sign if self.kind == "count" else sign * F.col(self.column))
        elif self.kind == "count":
            value = F.count("*")
        else:
            value = getattr(F, self.kind)(self.column)
        return (value.cast(self.cast) if self.cast else value).alias(self.name)


_MERGED = {
    "count": "t.{0} + s.{0}",
    "sum": "t.{0} + s.{0}",
    "min": "least(t.{0}, s.{0})",
    "max": "greatest(t.{0}, s.{0})",
}


@dataclass(frozen=True)
class IncrementalAggregate:
    """A grouped gold table kept exact by MERGE: each batch's rows grouped by ``group_by``
    (column names, or ``(name, SQL expression)`` pairs), its ``measures`` merged into the group's
    row (counts and sums added, least and greatest kept), and ``derived`` columns (name, SQL
    over the measures' names) computed from the merged measures. Late rows of any age update
    their group.

    The flow's source must hold each row once (a silver table that only appends): a row read
    twice would be counted twice. Or the flow reads its source's change feed (``Flow(...,
    change_feed=True)``): inserted rows and an update's new image are added, deleted rows and
    an update's old image taken away, and a group whose counts fall to zero is deleted, so an
    aggregate of a table that changes (an apply-changes state) stays exact. Least and greatest
    cannot be taken away: such a flow takes counts and sums only."""

    group_by: tuple[str | tuple[str, str], ...]
    measures: tuple[Measure, ...]
    derived: tuple[tuple[str, str], ...] = ()

    @property
    def keys(self) -> tuple[str, ...]:
        """The names of the grouping columns (the table's key)."""
        return tuple(g if isinstance(g, str) else g[0] for g in self.group_by)

    def increments(self, rows: DataFrame) -> DataFrame:
        """The batch's measures per group, with the derived columns they give alone (of a
        change feed's rows, when ``rows`` has ``_change_type``)."""
        groups = [
            F.col(g) if isinstance(g, str) else F.expr(g[1]).alias(g[0]) for g in self.group_by
        ]
        sign = None
        if "_change_type" in rows.columns:
            taken = F.col("_change_type").isin("delete", "update_preimage")
            sign = F.when(taken, F.lit(-1)).otherwise(F.lit(1))
        grouped = rows.groupBy(*groups).agg(*(m.aggregate(sign) for m in self.measures))
        return grouped.select("*", *(F.expr(sql).alias(name) for name, sql in self.derived))

    def clauses(self, change_feed: bool = False) -> str:
        """The MERGE clauses that add a batch's increments to the groups' rows (deleting the
        groups a change feed's counts empty)."""
        merged = {m.name: _MERGED[m.kind].format(quote_identifier(m.name)) for m in self.measures}
        updates = [f"t.{quote_identifier(n)} = {expression}" for n, expression in merged.items()]
        names = re.compile(r"\b(" + "|".join(map(re.escape, merged)) + r")\b")
        for name, sql in self.derived:
            over_merged = names.sub(lambda m: f"({merged[m.group(1)]})", sql)
            updates.append(f"t.{quote_identifier(name)} = {over_merged}")
        update, insert = f"UPDATE SET {', '.join(updates)}", "INSERT *"
        if not change_feed:
            return f"WHEN MATCHED THEN {update} WHEN NOT MATCHED THEN {insert}"
        counts = [m.name for m in self.measures if m.kind == "count"]
        emptied = " AND ".join(f"{merged[n]} = 0" for n in counts)
        held = " OR ".join(f"s.{quote_identifier(n)} <> 0" for n in counts)
        return (
            f"WHEN MATCHED AND {emptied} THEN DELETE WHEN MATCHED THEN {update} "
            f"WHEN NOT MATCHED AND ({held}) THEN {insert}"
        )

    def __call__(self, config: Config, flow: Flow, checkpoint: str, stream: str | None = None):
        if flow.change_feed:
            kinds = {m.kind for m in self.measures}
            if "count" not in kinds or kinds - {"count", "sum"}:
                raise ValueError(
                    f"flow {flow.name!r} reads a change feed: its aggregate takes counts and sums "
                    "only, a count among them"
                )
        clauses = self.clauses(flow.change_feed)
        merging = _into_declared(flow, self.increments, self.keys, clauses)
        return merging(config, flow, checkpoint, stream)


def _into_declared(
    flow: Flow, rows: Callable[[DataFrame], DataFrame], keys: tuple[str, ...], clauses: str
) -> MergingBatches:
    """A :class:`MergingBatches` into the one table ``flow`` writes, of ``rows(batch)`` cut to
    the columns that table declares (``UPDATE SET *`` takes the source's columns)."""
    (table,) = flow.outputs
    return MergingBatches(lambda batch: rows(batch).select(*table.columns), keys, clauses)
