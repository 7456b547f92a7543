"""Building blocks: the common flows of a pipeline as small declarations the engine runs, and
the declarations' public API a pipeline imports (docs/writing-a-pipeline.md).

Each flow block is a batch factory (``Flow(..., batch=block)``): the engine starts the flow
from its Delta source and hands every micro-batch to it. Exactly-once writes
(streams/exactly_once.py), the data-quality log and the contract's expectations, quarantine
replay and erasure come with it; a pipeline writes only what is its own: contracts, columns,
keys, orders and aggregates.

- :class:`Dataset`, :class:`ValidatedDataset`: a landed dataset's tables and flows from its
  contract (:func:`bronze_table`, :func:`silver_table`, :func:`quarantine_table`,
  :func:`validator`, :func:`bronze_append` one by one).
- :class:`ValidatedAppend`: a contract's records to silver once per key across all history
  (the first copy to arrive), the refused ones to the quarantine with their reason.
- :class:`ApplyChanges`: change records of any shape kept as SCD type 1 or 2, as Lakeflow's
  ``create_auto_cdc_flow``.
- :class:`LatestPerKey`: one row per key, a newer row (by a declared order) replacing an
  older one, whatever order they arrive in.
- :class:`IncrementalAggregate`: a grouped table kept exact by MERGE of each batch's
  increments (:class:`Measure`, :class:`MeasureWhere`), however late the data, from an
  append-only source or a change feed.
- :class:`AppendWhere`: the source's rows where a condition holds, appended.

Hand-written batch functions stay possible for what these cannot say (``batch=`` takes any
factory ``(config, flow, checkpoint, stream=None) -> foreachBatch function``).
"""

from medallion.contract_rules import Contract
from medallion.contracts import Check, FieldRule
from medallion.generate import write_in_files
from medallion.pipelines.blocks.append import Enrichment, ValidatedAppend
from medallion.pipelines.blocks.changes import CHANGE_FEED, ApplyChanges
from medallion.pipelines.blocks.datasets import (
    Dataset,
    ValidatedDataset,
    pattern_check,
    range_check,
)
from medallion.pipelines.blocks.derived import AppendWhere, MeasureWhere
from medallion.pipelines.blocks.merges import IncrementalAggregate, LatestPerKey, Measure
from medallion.pipelines.blocks.tables import (
    bronze_append,
    bronze_table,
    quarantine_table,
    silver_table,
    validator,
)

__all__ = [
    "CHANGE_FEED",
    "AppendWhere",
    "ApplyChanges",
    "Check",
    "Contract",
    "Dataset",
    "Enrichment",
    "FieldRule",
    "IncrementalAggregate",
    "LatestPerKey",
    "Measure",
    "MeasureWhere",
    "ValidatedAppend",
    "ValidatedDataset",
    "bronze_append",
    "bronze_table",
    "pattern_check",
    "quarantine_table",
    "range_check",
    "silver_table",
    "validator",
    "write_in_files",
]
