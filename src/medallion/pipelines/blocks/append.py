"""Validated append: a contract's records to silver once per key, the refused ones to the
quarantine."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from medallion.config import Config
from medallion.contract_rules import Contract
from medallion.declarations import (
    Flow,
    QuarantineReplay,
    Table,
)
from medallion.expectations import Expectations
from medallion.faults import pause_point
from medallion.streams.exactly_once import ReplayGuard
from medallion.streams.known_keys import KnownKeys, kept_keys
from medallion.streams.quality import QualityGate
from medallion.streams.sinks import transaction_app_id
from medallion.transforms.bronze import arrival_order

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
