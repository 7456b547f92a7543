"""Building blocks: the common flows of a pipeline as small declarations the engine runs.

Each is a batch factory (``Flow(..., batch=block)``): the engine starts the flow from its Delta
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

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from medallion.column_stages import built_once
from medallion.config import Config
from medallion.contract_rules import Contract
from medallion.contracts import Stages, apply_validation, field_text, field_value
from medallion.declarations import (
    APPEND_ONLY,
    INGEST_METADATA,
    KAFKA_METADATA,
    Flow,
    QuarantineReplay,
    Table,
)
from medallion.expectations import Expectations
from medallion.faults import pause_point
from medallion.sql_names import quote_identifier, validate_identifier
from medallion.streams.exactly_once import MergingBatches, ReplayGuard
from medallion.streams.known_keys import KnownKeys, kept_keys
from medallion.streams.quality import QualityGate
from medallion.streams.sinks import start_bronze_append, transaction_app_id
from medallion.transforms.bronze import METADATA_COLUMNS, arrival_order, kafka_position_columns


def validator(contract: Contract) -> Callable[[DataFrame, Expectations | None], DataFrame]:
    """The validation of ``contract``'s records: ``validate(bronze, expectations=None)`` gives
    bronze's rows with ``reason`` (NULL when valid), the rules each broke, every field typed
    (a string as its text, the others as their kind's value) and the ingestion metadata."""

    def validate(bronze: DataFrame, expectations: Expectations | None = None) -> DataFrame:
        expectations = expectations or Expectations(contract.dataset)
        positions = tuple(kafka_position_columns(bronze))
        return apply_validation(bronze, _typed_stages(contract, positions, expectations))

    return validate


@built_once
def _typed_stages(
    contract: Contract, kafka_positions: tuple[str, ...], expectations: Expectations
) -> Stages:
    typed = [
        (field_text if f.kind == "string" else field_value)(f.name).alias(f.name)
        for f in contract.fields
    ]
    metadata = [F.col(name) for name in (*METADATA_COLUMNS, *kafka_positions)]
    return contract.validation_stages(expectations, [*typed, *metadata])


_SQL_TYPES = {
    "string": "STRING",
    "timestamp": "TIMESTAMP",
    "decimal": "DECIMAL(18,4)",
    "money": "DECIMAL(18,4)",
    "number": "DOUBLE",
    "integer": "BIGINT",
}


def bronze_table(contract: Contract) -> Table:
    """Bronze of ``contract``'s dataset: every line as it landed (each field as text, the raw
    line, its file or Kafka record and ingestion time), append-only."""
    fields = ", ".join(f"{f.name} STRING" for f in contract.fields)
    schema = f"{fields}, {INGEST_METADATA}, {KAFKA_METADATA}"
    return Table("bronze", contract.dataset, schema, APPEND_ONLY)


def silver_table(contract: Contract, zorder: tuple[str, ...] = ()) -> Table:
    """Silver of ``contract``'s dataset: its valid records, each field typed by its kind (NOT
    NULL when required), with their ingestion time and file; append-only."""
    fields = ", ".join(
        f"{f.name} {_SQL_TYPES[f.kind]}{' NOT NULL' if f.required else ''}" for f in contract.fields
    )
    schema = f"{fields}, _ingested_at TIMESTAMP, _source_file STRING"
    return Table("silver", contract.dataset, schema, APPEND_ONLY, zorder=zorder)


def quarantine_table(contract: Contract, key_field: str) -> Table:
    """The quarantine of ``contract``'s dataset: each refused line with its ``key_field`` (as
    text, when it has one), its reason, the raw line, its file and ingestion time."""
    schema = (
        f"{validate_identifier(key_field, 'key field')} STRING, reason STRING NOT NULL, "
        "_raw STRING, _source_file STRING, _ingested_at TIMESTAMP"
    )
    return Table("silver", f"{contract.dataset}_quarantine", schema, quarantine=True)


def bronze_append(contract: Contract) -> Callable[..., object]:
    """The start of a flow that appends every landed line of ``contract``'s dataset to its
    bronze table, unchanged (``Flow(..., Landing(dataset), (bronze,), bronze_append(c))``)."""
    return partial(start_bronze_append, fields=contract.fields)


# How a validated append enriches the new rows before they are appended: made once per
# stream from the run's Config (a rule's settings), called with each batch's new rows.
Enrichment = Callable[[Config], Callable[[SparkSession, DataFrame], DataFrame]]


@dataclass(frozen=True)
class ValidatedAppend:
    """Records validated against ``contract`` (``validate(bronze, expectations)`` adds the
    ``reason``, NULL when valid, and the typed columns): the valid ones appended to ``silver``
    once per ``key`` across all history (the first copy to arrive, found in the stream's key
    index), the refused ones to ``quarantine``.

    ``columns``: what is kept of a valid record (default: ``silver``'s columns); ``enrich``:
    what turns the new records into ``silver``'s rows (a screening against another table)."""

    contract: Contract
    validate: Callable[[DataFrame, Expectations], DataFrame]
    silver: Table
    quarantine: Table
    key: tuple[str, ...]
    columns: tuple[str, ...] = ()
    enrich: Enrichment | None = None

    def __call__(
        self, config: Config, flow: Flow, checkpoint: str, stream: str | None = None
    ) -> _ValidatedAppendBatch:
        return _ValidatedAppendBatch(self, config, stream or flow.name, checkpoint)

    def quarantine_replay(self, flow_name: str) -> QuarantineReplay:
        """How ``medallion quarantine replay`` promotes this flow's quarantined records: the
        pipeline declares it by itself (declarations.Pipeline)."""
        return QuarantineReplay(
            self.quarantine, flow_name, self.contract.dataset, self.validate, key=self.key
        )

    def first_arrivals(self, validated: DataFrame) -> DataFrame:
        """The valid records, one per key: the first to arrive."""
        valid = validated.where(F.col("reason").isNull())
        first = Window.partitionBy(*self.key).orderBy(*arrival_order(valid))
        ranked = valid.withColumn("_arrival", F.row_number().over(first))
        return ranked.where("_arrival = 1").select(*(self.columns or self.silver.columns))

    def refused(self, validated: DataFrame) -> DataFrame:
        """The refused records, as the quarantine keeps them: reason and raw line."""
        return validated.where(F.col("reason").isNotNull()).select(*self.quarantine.columns)


class _ValidatedAppendBatch:
    """The ``foreachBatch`` function of one stream of a :class:`ValidatedAppend` flow."""

    def __init__(self, block: ValidatedAppend, config: Config, stream: str, checkpoint: str):
        self.block, self.stream = block, stream
        self.silver = config.table(block.silver.key)
        self.quarantine = config.table(block.quarantine.key)
        self.app_id = transaction_app_id(stream, checkpoint)
        self.known = KnownKeys(self.silver, block.key, kept_keys(checkpoint, self.silver))
        self.guard = ReplayGuard(checkpoint)
        self.gate = QualityGate(config, stream, block.contract, block.silver.key)
        self.enrich = block.enrich(config) if block.enrich else None

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        spark, gate, block = batch.sparkSession, self.gate, self.block
        validated = block.validate(batch, gate.expectations).persist()
        firsts = block.first_arrivals(validated).persist()
        try:
            quality, (invalid,) = gate.measure(validated, F.count_if(F.col("reason").isNotNull()))
            gate.check(validated, quality)  # a rule set to fail stops the batch here
            with self.guard.batch(spark, batch_id) as writes:
                app = self.app_id(spark)

                def write() -> None:
                    if invalid:
                        writes.append(block.refused(validated), self.quarantine, app)
                    pause_point(f"{self.stream}:quarantined")  # crash tests only
                    unseen, hashes = self.known.new_rows(spark, firsts)
                    if len(hashes[0]):
                        rows = self.enrich(spark, unseen) if self.enrich else unseen
                        writes.append(rows, self.silver, app)
                        self.known.added(spark, hashes, writes.tag(app))

                gate.record_beside(writes, quality, app, write)
        finally:
            firsts.unpersist()
            validated.unpersist()


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

    def aggregate(self) -> Column:
        """The measure over a batch's rows."""
        value = F.count("*") if self.kind == "count" else getattr(F, self.kind)(self.column)
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
    twice would be counted twice."""

    group_by: tuple[str | tuple[str, str], ...]
    measures: tuple[Measure, ...]
    derived: tuple[tuple[str, str], ...] = ()

    @property
    def keys(self) -> tuple[str, ...]:
        """The names of the grouping columns (the table's key)."""
        return tuple(g if isinstance(g, str) else g[0] for g in self.group_by)

    def increments(self, rows: DataFrame) -> DataFrame:
        """The batch's measures per group, with the derived columns they give alone."""
        groups = [
            F.col(g) if isinstance(g, str) else F.expr(g[1]).alias(g[0]) for g in self.group_by
        ]
        grouped = rows.groupBy(*groups).agg(*(m.aggregate() for m in self.measures))
        return grouped.select("*", *(F.expr(sql).alias(name) for name, sql in self.derived))

    def clauses(self) -> str:
        """The MERGE clauses that add a batch's increments to the groups' rows."""
        merged = {m.name: _MERGED[m.kind].format(quote_identifier(m.name)) for m in self.measures}
        updates = [f"t.{quote_identifier(n)} = {expression}" for n, expression in merged.items()]
        names = re.compile(r"\b(" + "|".join(map(re.escape, merged)) + r")\b")
        for name, sql in self.derived:
            over_merged = names.sub(lambda m: f"({merged[m.group(1)]})", sql)
            updates.append(f"t.{quote_identifier(name)} = {over_merged}")
        return f"WHEN MATCHED THEN UPDATE SET {', '.join(updates)} WHEN NOT MATCHED THEN INSERT *"

    def __call__(self, config: Config, flow: Flow, checkpoint: str, stream: str | None = None):
        merging = _into_declared(flow, self.increments, self.keys, self.clauses())
        return merging(config, flow, checkpoint, stream)


def _into_declared(
    flow: Flow, rows: Callable[[DataFrame], DataFrame], keys: tuple[str, ...], clauses: str
) -> MergingBatches:
    """A :class:`MergingBatches` into the one table ``flow`` writes, of ``rows(batch)`` cut to
    the columns that table declares (``UPDATE SET *`` takes the source's columns)."""
    (table,) = flow.outputs
    return MergingBatches(lambda batch: rows(batch).select(*table.columns), keys, clauses)
