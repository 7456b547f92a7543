"""Building blocks: the common flows of a pipeline as small declarations the engine runs.

Each flow block is a batch factory (``Flow(..., batch=block)``): the engine starts the flow from its Delta
source and hands every micro-batch to it. Exactly-once writes (streams/exactly_once.py), the
data-quality log and the contract's expectations, quarantine replay and erasure come with it;
a pipeline writes only what is its own: contracts, columns, keys, orders and aggregates.

- :func:`bronze_table`, :func:`silver_table`, :func:`quarantine_table`: a dataset's tables,
  declared from its contract; :func:`bronze_append`: its bronze flow's start.
- :func:`validator`: a contract's validation, every field typed by its kind.
- :class:`ValidatedAppend`: a contract's records to silver once per key across all history
  (the first copy to arrive), the refused ones to the quarantine with their reason.
- :class:`LatestPerKey`: one row per key, a newer row (by a declared order) replacing an
  older one, whatever order they arrive in.
- :class:`IncrementalAggregate`: a grouped gold table kept exact by MERGE of each batch's
  increments: counts, sums, least and greatest values, and columns derived from them, however
  late the data.

Hand-written batch functions stay possible for what these cannot say (``batch=`` takes any
factory ``(config, flow, checkpoint, stream=None) -> foreachBatch function``).

Example (the IoT pipeline, src/medallion/pipelines/iot/)::

    silver = ValidatedAppend(READINGS, validate_readings, SILVER, QUARANTINE, KEY)
    status = LatestPerKey(("device_id",), "reading_timestamp")
"""

from medallion.pipelines.blocks.append import Enrichment, ValidatedAppend
from medallion.pipelines.blocks.changes import ApplyChanges
from medallion.pipelines.blocks.merges import IncrementalAggregate, LatestPerKey, Measure
from medallion.pipelines.blocks.tables import (
    bronze_append,
    bronze_table,
    quarantine_table,
    silver_table,
    validator,
)

__all__ = [
    "ApplyChanges",
    "Enrichment",
    "IncrementalAggregate",
    "LatestPerKey",
    "Measure",
    "ValidatedAppend",
    "bronze_append",
    "bronze_table",
    "quarantine_table",
    "silver_table",
    "validator",
]
