"""Apply full-row change records to a state table: a sequence-aware MERGE, deletes included,
with a tombstone per deleted key so that an older change arriving later cannot bring it back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from medallion.config import Config
from medallion.contract_rules import Contract
from medallion.declarations import Flow, Table
from medallion.expectations import Expectations
from medallion.faults import pause_point
from medallion.streams.apply_history import KeptHistory, apply_history
from medallion.streams.batch_tuning import BatchCache, SizeTuning
from medallion.streams.exactly_once import ReplayGuard
from medallion.streams.quality import QualityGate
from medallion.streams.sinks import transaction_app_id
from medallion.tables import read_table
from medallion.transforms.change_records import (
    ChangeRecords,
    latest_change_per_key,
    newer_than_tombstones,
    quarantined_changes,
    valid_changes,
)

_TOMBSTONE_NEWER = (
    "named_struct('seq', s.sequence_num, 'at', s.updated_at) > "
    "named_struct('seq', t.sequence_num, 'at', t.updated_at)"
)
_RECORD_TOMBSTONES = f"""
    WHEN MATCHED AND {_TOMBSTONE_NEWER} THEN UPDATE SET *
    WHEN NOT MATCHED THEN INSERT *
"""


def apply_changes_clauses(records: ChangeRecords) -> str:
    """The MERGE clauses that apply each key's newest change (source ``s``) to its state row
    (target ``t``): only a newer change acts; a DELETE removes the row."""
    newer = f"{records.order_sql('s')} > {records.order_sql('t')}"
    columns = records.change_columns
    return f"""
        WHEN MATCHED AND {newer} AND s.operation = 'DELETE' THEN DELETE
        WHEN MATCHED AND {newer} THEN UPDATE SET {", ".join(f"t.`{c}` = s.`{c}`" for c in columns)}
        WHEN NOT MATCHED AND s.operation <> 'DELETE' THEN
            INSERT ({", ".join(f"`{c}`" for c in columns)})
            VALUES ({", ".join(f"s.`{c}`" for c in columns)})
    """


@dataclass(frozen=True)
class ApplyChanges:
    """The batch factory of a flow that applies change records to the ``state`` table.

    ``validate`` turns bronze rows into rows with ``reason`` (NULL when valid), the rules each
    broke (``contract``'s, whose counts go to the data-quality log: streams/quality.py) and the
    typed change columns. Invalid changes go to the quarantine. Valid ones are reduced to each key's
    newest change, changes not newer than a recorded DELETE are dropped, and one MERGE applies
    the rest: newer UPDATE/INSERT rows replace older ones, a newer DELETE removes the row (a
    ``delete`` in the Change Data Feed), older changes change nothing. Each key's newest DELETE
    is kept in the tombstones (whether or not a newer change followed it in the batch), so that
    an older change arriving later cannot bring the key back; a newer INSERT can. A batch
    without a valid DELETE leaves the tombstones untouched. With ``history``, every valid change
    is also applied to a history table (SCD type 2, streams/apply_history.py). Each write
    happens once per batch (streams/exactly_once.py).

    Example::

        accounts_batch = ApplyChanges(
            ACCOUNTS, ACCOUNT_CHANGES, validate_account_changes,
            SILVER_ACCOUNTS, ACCOUNT_TOMBSTONES, ACCOUNTS_QUARANTINE, KEPT_HISTORY,
        )
        Flow("silver_accounts", "silver", BRONZE_ACCOUNTS, (...), batch=accounts_batch)
    """

    records: ChangeRecords
    contract: Contract
    validate: Callable[[DataFrame, Expectations], DataFrame]
    state: Table
    tombstones: Table
    quarantine: Table
    history: KeptHistory | None = None

    def __call__(
        self, config: Config, flow: Flow, checkpoint: str, stream: str | None = None
    ) -> ChangesBatch:
        written = {t.key for t in (self.state, self.tombstones, self.quarantine)}
        if self.history is not None:
            written.add(self.history.table_key)
        if not written <= set(flow.writes):
            raise ValueError(f"flow {flow.name!r} does not declare it writes {sorted(written)}")
        return ChangesBatch(self, config, flow.name, checkpoint, stream or flow.name)


class ChangesBatch:
    """The ``foreachBatch`` function of one stream of an :class:`ApplyChanges` flow, written
    as ``stream``."""

    def __init__(
        self, changes: ApplyChanges, config: Config, flow_name: str, checkpoint: str, stream: str
    ) -> None:
        self.changes, self.records, self.flow_name = changes, changes.records, flow_name
        self.state, self.tombstones = (
            config.table(changes.state.key),
            config.table(changes.tombstones.key),
        )
        self.quarantine = config.table(changes.quarantine.key)
        self.app_id = transaction_app_id(stream, checkpoint)
        self.guard = ReplayGuard(checkpoint)
        self.clauses = apply_changes_clauses(changes.records)
        self.gate = QualityGate(config, stream, changes.contract, changes.state.key)
        self.kept = changes.history.of(config, changes.records) if changes.history else None
        self.tune_for_size = SizeTuning()

    def validated(self, rows: DataFrame) -> DataFrame:
        """``rows`` of bronze validated against the contract, with this stream's expectations."""
        return self.changes.validate(rows, self.gate.expectations)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        spark, records, gate = batch.sparkSession, self.records, self.gate
        if self.kept:
            self.kept.fill_once(spark, (self.state, self.tombstones), self.validated)
        self.tune_for_size.before_caching(spark)
        # Over Spark Connect a checkpoint, not a cache: the history's MERGE source on top of
        # the validation's plan nests deeper than the protocol allows (BatchCache).
        cache = BatchCache()
        validated = cache(self.validated(batch))
        try:
            valid, deleting = F.col("reason").isNull(), F.col("operation") == "DELETE"
            quality, (invalid, valid_deletes, valid_count) = gate.measure(
                validated,
                F.count_if(~valid),
                F.count_if(valid & deleting),
                F.count_if(valid),
            )
            gate.check(validated, quality)  # a rule set to fail stops the batch here
            self.tune_for_size(spark, invalid + valid_count)  # the MERGEs' plans, for its size
            changes = valid_changes(records, validated)
            newest = latest_change_per_key(records, changes)
            # Both MERGEs below read the tombstones as they were before this batch: the
            # state MERGE runs first, and the tombstones MERGE only adds newer DELETEs.
            live = newer_than_tombstones(records, newest, read_table(spark, self.tombstones))
            # Each key's newest DELETE of the batch, even one a newer change overrides: the
            # tombstones then hold every key's newest DELETE ever seen, whatever the batch
            # boundaries.
            deletes = latest_change_per_key(records, changes.where(deleting)).select(
                *records.tombstone_columns
            )
            with self.guard.batch(spark, batch_id) as writes:
                app = self.app_id(spark)

                def apply() -> None:
                    if invalid:
                        writes.append(quarantined_changes(records, validated), self.quarantine, app)
                    live_rows = live.select(*records.change_columns)
                    inserted = live_rows.where(F.col("operation") != "DELETE")
                    writes.merge(
                        self.state, live_rows, [records.key], self.clauses, app, into_empty=inserted
                    )
                    pause_point(f"{self.flow_name}:{self.state.name}_merged")  # crash tests only
                    if valid_deletes:  # most batches have none: no MERGE's ten Spark jobs
                        writes.merge(
                            self.tombstones,
                            deletes,
                            [records.key],
                            _RECORD_TOMBSTONES,
                            app,
                            into_empty=deletes,
                        )
                    if self.kept and valid_count:
                        kept = self.kept
                        apply_history(writes, kept.table, kept.history, changes, app)
                        pause_point(f"{self.flow_name}:{kept.table.name}_merged")  # crash tests

                gate.record_beside(writes, quality, app, apply)
        finally:
            cache.release()
