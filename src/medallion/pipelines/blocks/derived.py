"""Blocks over the rows a condition chooses: an append of a source's chosen rows, and a measure
of an incremental aggregate taken over them."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from medallion.config import Config
from medallion.declarations import Flow
from medallion.erasure_log import erased_versions
from medallion.pipelines.blocks.merges import Measure
from medallion.streams.sinks import Trigger, start_append
from medallion.streams.sources import delta_stream


@dataclass(frozen=True)
class AppendWhere:
    """The start of a flow that appends to its one table the rows of its Delta source where
    ``where`` (SQL) holds, cut to the table's columns (``Flow(..., start=AppendWhere(...))``).
    Delta's sink writes each batch once: a source that only appends gives each row once. Of a
    ``change_feed`` flow, every change row (an audit trail), but none of an erasure's commits:
    an erasure is no change to keep (medallion/erasure_log.py)."""

    where: str = "TRUE"

    def __call__(
        self, spark: SparkSession, config: Config, flow: Flow, trigger: Trigger
    ) -> StreamingQuery:
        checkpoint = config.checkpoint(flow.name)
        options = config.source_options(flow.name)
        source = delta_stream(
            spark, config.table(flow.source.key), options, flow.change_feed, checkpoint
        )
        if flow.change_feed and (erased := erased_versions(spark, config, flow.source.key)):
            source = source.where(~F.col("_commit_version").isin(erased))
        (table,) = flow.outputs
        rows = source.where(self.where).select(*table.columns)
        return start_append(rows, config.table(table.key), checkpoint, trigger, flow.name)


@dataclass(frozen=True)
class MeasureWhere(Measure):
    """A :class:`~medallion.pipelines.blocks.merges.Measure` over the rows where ``where``
    (SQL) holds only: a count of them, or their sum (0 when none), least or greatest."""

    where: str = "TRUE"

    def aggregate(self, sign: Column | None = None) -> Column:
        """The measure over a batch's chosen rows (``sign``: see ``Measure.aggregate``)."""
        chosen = F.expr(self.where)
        if self.kind == "count" and sign is None:
            value = F.count_if(chosen)
        elif self.kind == "count":
            value = F.coalesce(F.sum(F.when(chosen, sign)), F.lit(0))
        elif self.kind == "sum":
            amount = F.col(self.column) if sign is None else sign * F.col(self.column)
            value = F.coalesce(F.sum(F.when(chosen, amount)), F.lit(0))
        else:
            value = getattr(F, self.kind)(F.when(chosen, F.col(self.column)))
        return (value.cast(self.cast) if self.cast else value).alias(self.name)
