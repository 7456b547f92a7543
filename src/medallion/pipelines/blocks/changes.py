"""Apply changes: change records of any shape kept as a table's current state (SCD type 1) or
as every version of it (SCD type 2), as Lakeflow's ``create_auto_cdc_flow`` does. The
transformations are transforms/auto_cdc.py's; this is their stream wiring."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from medallion.config import Config
from medallion.contract_rules import Contract
from medallion.declarations import STREAMING_TABLE_PROPERTIES, Flow, QuarantineReplay, Table
from medallion.faults import pause_point
from medallion.pipelines.blocks.tables import validator
from medallion.sql_names import validate_identifier
from medallion.streams.apply_history import KeptHistory, apply_history
from medallion.streams.batch_tuning import BatchCache, SizeTuning
from medallion.streams.exactly_once import BatchWrites, ReplayGuard
from medallion.streams.quality import QualityGate
from medallion.streams.sinks import transaction_app_id
from medallion.tables import read_table
from medallion.transforms.auto_cdc import (
    ACTION,
    CHANGES,
    END,
    START,
    VERSION_ID,
    ChangeShape,
    Versions,
    scd1_plan,
)
from medallion.transforms.change_records import valid_changes

_KEPT = (START, END, VERSION_ID, CHANGES)
# The properties of a table whose changes a flow reads (``Flow(..., change_feed=True)``).
CHANGE_FEED = {**STREAMING_TABLE_PROPERTIES, "delta.enableChangeDataFeed": "true"}
_TOMBSTONES = "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"


@dataclass(frozen=True)
class ApplyChanges:
    """Change records applied to the flow's first table, in the manner of Lakeflow's
    ``create_auto_cdc_flow``:

    - ``keys``: the columns that identify a row; ``sequence_by``: SQL giving a change's order
      (a column, or ``struct(a, b)``), read from the stored columns;
    - ``apply_as_deletes``: SQL that holds for a change that deletes its key (a full-row
      ``operation = 'DELETE'``, or a typed event's ``event_type = 'cancelled'``);
      ``apply_as_truncates``: one that empties the table of every row not newer (type 1 only);
    - ``columns`` / ``except_columns``: what the table stores of a change (default: the columns
      the table declares); ``stored_as``: 1 (the current row per key) or 2 (every version:
      :meth:`history_table`), with ``track_history`` the columns whose change opens a version
      (default: the stored columns not starting with ``_``);
    - ``contract`` with its ``quarantine``: validate the source's rows first (a bronze table),
      by ``validate`` (default: ``validator(contract)``); without, the source's rows are taken
      as they are (a silver table of typed events);
    - ``tombstones_table``: where a type 1 table keeps its deletes, when not the default
      :meth:`tombstones` (it may keep fewer columns: the keys and what ``sequence_by`` reads);
      ``history``: full-row change records' history kept beside it as well
      (streams/apply_history.py: retail's customers, banking's accounts).

    A newer change replaces an older one whatever their order of arrival; a late change older
    than its key's delete stays deleted (type 1 keeps each key's newest delete in the flow's
    second table, :meth:`tombstones`); type 2 recomputes a key's versions with a late change.
    Each write happens once per batch; the Change Data Feed of a type 1 table is exact (an
    aggregate over it: ``IncrementalAggregate`` of a ``change_feed`` flow).

    Example (docs/writing-a-pipeline.md)::

        shipments = ApplyChanges(("shipment_id",), "sequence", "status = 'cancelled'")
        Flow("silver_shipments", "silver", EVENTS, (STATE, shipments.tombstones(STATE)),
             batch=shipments)
    """

    keys: tuple[str, ...]
    sequence_by: str
    apply_as_deletes: str | None = None
    apply_as_truncates: str | None = None
    columns: tuple[str, ...] = ()
    except_columns: tuple[str, ...] = ()
    stored_as: int = 1
    track_history: tuple[str, ...] | None = None
    contract: Contract | None = None
    quarantine: Table | None = None
    validate: Callable[..., DataFrame] | None = field(default=None, compare=False)
    tombstones_table: Table | None = None
    history: KeptHistory | None = None

    def __post_init__(self) -> None:
        for name in (*self.keys, *self.columns, *self.except_columns, *(self.track_history or ())):
            validate_identifier(name, "column")
        if self.stored_as not in (1, 2):
            raise ValueError("stored_as is 1 (the current row per key) or 2 (every version)")
        if self.stored_as == 2 and self.apply_as_truncates:
            raise ValueError("apply_as_truncates applies to a type 1 table only")
        if self.stored_as == 1 and self.track_history is not None:
            raise ValueError("track_history applies to a type 2 table only")
        if (self.contract is None) != (self.quarantine is None):
            raise ValueError("a contract and its quarantine go together")
        if self.history is not None and (self.stored_as != 1 or self.contract is None):
            raise ValueError("a history beside the table takes a type 1 table and a contract")

    def stored_columns(self, target: Table) -> tuple[str, ...]:
        """What ``target`` stores of a change: its declared columns (or ``columns``), less
        ``except_columns`` and a type 2 table's own."""
        chosen = self.columns or tuple(c for c in target.columns if c not in _KEPT)
        return tuple(c for c in chosen if c not in self.except_columns)

    def shape(self, target: Table) -> ChangeShape:
        return ChangeShape(
            self.keys,
            self.stored_columns(target),
            self.sequence_by,
            self.apply_as_deletes,
            self.apply_as_truncates,
        )

    def tombstones(self, target: Table) -> Table:
        """Where a type 1 ``target`` keeps each deleted key's newest delete (and truncations,
        without a key): ``tombstones_table``, or ``<target>_tombstones`` of its stored columns,
        none required."""
        if self.tombstones_table is not None:
            return self.tombstones_table
        types = dict(target.column_types)
        schema = ", ".join(f"{c} {_nullable(types[c])}" for c in self.stored_columns(target))
        return Table(target.layer, f"{target.name}_tombstones", schema, zorder=self.keys)

    def history_table(
        self, layer: str, name: str, schema: str, sequence_type: str, **options: object
    ) -> Table:
        """A type 2 table storing the columns ``schema`` declares: the keys required, the others
        not (a delete's own row has no content), then ``__START_AT`` and ``__END_AT`` (of
        ``sequence_type``, the type of ``sequence_by``), ``_version_id`` and ``_changes``."""
        types = Table(layer, name, schema).column_types
        columns = [f"{c} {t if c in self.keys else _nullable(t)}" for c, t in types]
        changes = [f"{c}: {_nullable(t)}" for c, t in types if c not in self.keys]
        changes += [f"_sequence: {sequence_type}", "_delete: BOOLEAN"]
        schema = ", ".join(
            (
                *columns,
                f"{START} {sequence_type}",
                f"{END} {sequence_type}",
                f"{VERSION_ID} BIGINT NOT NULL",
                f"{CHANGES} ARRAY<STRUCT<{', '.join(changes)}>>",
            )
        )
        options = {"properties": CHANGE_FEED, "zorder": self.keys, **options}
        return Table(layer, name, schema, history=True, **options)  # type: ignore[arg-type]

    def quarantine_replay(self, flow_name: str) -> QuarantineReplay | None:
        """How ``medallion quarantine replay`` promotes the changes this flow quarantined."""
        if self.contract is None or self.quarantine is None:
            return None
        validate = self.validate or validator(self.contract)
        return QuarantineReplay(self.quarantine, flow_name, self.contract.dataset, validate)

    def __call__(
        self, config: Config, flow: Flow, checkpoint: str, stream: str | None = None
    ) -> _ChangesBatch:
        target = flow.outputs[0]
        needed = [self.quarantine.key] if self.quarantine else []
        if self.history is not None:
            needed.append(self.history.table_key)
        if self.stored_as == 1 and (self.apply_as_deletes or self.apply_as_truncates):
            needed.append(self.tombstones(target).key)
        missing = set(needed) - set(flow.writes)
        if missing:
            raise ValueError(f"flow {flow.name!r} does not declare it writes {sorted(missing)}")
        return _ChangesBatch(self, config, flow, checkpoint, stream or flow.name)


def _nullable(sql_type: str) -> str:
    return sql_type.replace(" not null", "")


class _ChangesBatch:
    """The ``foreachBatch`` function of one stream of an :class:`ApplyChanges` flow."""

    def __init__(
        self, block: ApplyChanges, config: Config, flow: Flow, checkpoint: str, stream: str
    ) -> None:
        target = flow.outputs[0]
        self.block, self.name, self.shape = block, flow.name, block.shape(target)
        self.types = dict(target.column_types)
        self.table = config.table(target.key)
        self.tombstones = config.table(block.tombstones(target).key)
        self.tombstone_columns = block.tombstones(target).columns
        self.versions = None
        if block.stored_as == 2:
            tracked = block.track_history or tuple(
                c for c in self.shape.content if not c.startswith("_")
            )
            self.versions = Versions(self.shape, tracked)
        self.gate, self.quarantine = None, None
        if block.contract is not None and block.quarantine is not None:
            self.gate = QualityGate(config, stream, block.contract, target.key)
            self.quarantine = config.table(block.quarantine.key)
            self.validate = block.validate or validator(block.contract)
        self.kept = block.history.of(config) if block.history else None
        self.app_id = transaction_app_id(stream, checkpoint)
        self.guard = ReplayGuard(checkpoint)
        self.tune_for_size = SizeTuning()

    def validated(self, rows: DataFrame) -> DataFrame:
        """``rows`` validated against the contract, with this stream's expectations."""
        assert self.gate is not None
        return self.validate(rows, self.gate.expectations)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        spark, gate, shape = batch.sparkSession, self.gate, self.shape
        if self.kept:
            self.kept.fill_once(spark, (self.table, self.tombstones), self.validated)
        self.tune_for_size.before_caching(spark)
        # Over Spark Connect a checkpoint, not a cache: a history's MERGE source on top of the
        # validation's plan nests deeper than the protocol allows (BatchCache).
        cache = BatchCache()
        rows = cache(self.validated(batch) if gate else batch)
        try:
            valid = F.col("reason").isNull() if gate else F.lit(True)
            no_key = F.greatest(*(F.col(k).isNull() for k in shape.keys), F.lit(False))
            truncating, deleting = (
                F.coalesce(F.expr(sql), F.lit(False)) if sql else F.lit(False)
                for sql in (shape.truncates, shape.deletes)
            )
            counts = (
                F.count_if(~valid),
                F.count_if(valid),
                F.count_if(valid & no_key & ~truncating),
                F.count_if(valid & truncating),
                F.count_if(valid & deleting),
            )
            if gate:
                quality, (invalid, valids, keyless, truncates, deletes) = gate.measure(
                    rows, *counts
                )
                gate.check(rows, quality)  # a rule set to fail stops the batch here
            else:
                invalid, valids, keyless, truncates, deletes = rows.agg(*counts).first()  # type: ignore[misc]
            if keyless:
                keys = ", ".join(shape.keys)
                raise ValueError(f"{self.name}: {keyless} changes of the batch have no {keys}")
            self.tune_for_size(spark, invalid + valids)  # the MERGEs' plans, for its size
            changes = shape.changes(rows.where(valid))
            with self.guard.batch(spark, batch_id) as writes:
                app = self.app_id(spark)

                def apply() -> None:
                    if invalid:
                        refused = rows.where(~valid).select(*self.block.quarantine.columns)
                        writes.append(refused, self.quarantine, app)
                    if self.versions is not None:
                        apply_history(writes, self.table, self.versions, changes, app)
                        return
                    self._apply_type_1(writes, changes, truncates > 0, deletes > 0, app)
                    if self.kept and valids:
                        records = self.kept.history.records
                        kept_changes = valid_changes(records, rows)
                        apply_history(writes, self.kept.table, self.kept.history, kept_changes, app)
                        pause_point(f"{self.name}:{self.kept.table.name}_merged")  # crash tests

                if gate:
                    gate.record_beside(writes, quality, app, apply)
                else:
                    apply()
        finally:
            cache.release()

    def _apply_type_1(
        self, writes: BatchWrites, changes: DataFrame, truncating: bool, deleting: bool, app: str
    ) -> None:
        spark, shape, columns = writes.spark, self.shape, self.shape.columns
        if shape.deletes or shape.truncates:
            tombstones = read_table(spark, self.tombstones)
            for missing in (c for c in columns if c not in tombstones.columns):
                kind = _nullable(self.types[missing])
                tombstones = tombstones.withColumn(missing, F.lit(None).cast(kind))
        else:
            tombstones = changes.select(*columns).where(F.lit(False))
        rows, deletes = scd1_plan(
            shape, changes, read_table(spark, self.table), tombstones, truncating
        )
        listed = ", ".join(f"`{c}`" for c in columns)
        clauses = (
            f"WHEN MATCHED AND s.{ACTION} = 'delete' THEN DELETE "
            f"WHEN MATCHED AND s.{ACTION} = 'upsert' THEN UPDATE SET "
            + ", ".join(f"t.`{c}` = s.`{c}`" for c in columns)
            + f" WHEN NOT MATCHED AND s.{ACTION} = 'upsert' THEN INSERT ({listed}) "
            f"VALUES ({', '.join(f's.`{c}`' for c in columns)})"
        )
        upserts = rows.where(F.col(ACTION) == "upsert").select(*columns)
        writes.merge(self.table, rows, shape.keys, clauses, app, into_empty=upserts)
        pause_point(f"{self.name}:{self.table.name}_merged")  # crash tests only
        if deleting or truncating:  # most batches have none: no MERGE's ten Spark jobs
            kept = deletes.select(*self.tombstone_columns)
            writes.merge(self.tombstones, kept, shape.keys, _TOMBSTONES, app, into_empty=kept)
