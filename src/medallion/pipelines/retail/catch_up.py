"""The events pipeline's silver and gold stages each run alone, each from its Delta source,
while a rebuilt layer catches up (streams/fusion.py); events.py holds the fused batch."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from medallion.config import Config
from medallion.declarations import Flow
from medallion.pipelines.retail.contract import EVENTS
from medallion.pipelines.retail.events import (
    EVENT_COLUMNS,
    EventTables,
    append_silver,
    batch_summary,
    new_silver_rows,
    write_gold,
)
from medallion.pipelines.retail.transforms.gold import USER_KEY_COLUMNS
from medallion.pipelines.retail.transforms.silver import quarantined_events, validate_events
from medallion.streams.batch_tuning import BatchCache, SizeTuning
from medallion.streams.exactly_once import ReplayGuard
from medallion.streams.known_keys import KnownKeys, kept_keys
from medallion.streams.quality import QualityGate
from medallion.streams.sinks import transaction_app_id
from medallion.streams.table_schema import check_table_schema


class SilverEventsBatch:
    """The ``foreachBatch`` function of ``silver_events`` while it catches up on bronze (a
    rebuilt silver), or of ``stream`` (a quarantine replay): quarantine the invalid, append the
    valid events whose ``event_id`` silver does not hold yet. Each write happens once per batch
    (streams/exactly_once.py)."""

    def __init__(
        self, config: Config, flow: Flow, checkpoint: str, stream: str | None = None
    ) -> None:
        self.stream, self.checkpoint = stream or flow.name, checkpoint
        self.tables = tables = EventTables.of(config)
        self.extra = config.carried(tables.silver.key)
        self.tune_for_size = SizeTuning()
        self.app_id = transaction_app_id(self.stream, checkpoint)
        self.known_ids = KnownKeys(
            tables.silver, ["event_id"], kept_keys(checkpoint, tables.silver)
        )
        self.guard = ReplayGuard(checkpoint)
        self.gate = QualityGate(config, self.stream, EVENTS, tables.silver.key)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        spark, tables, extra, gate = batch.sparkSession, self.tables, self.extra, self.gate
        persist = BatchCache()
        try:
            # A renamed or retyped silver column stops the stream here, before any write.
            schema = check_table_schema(spark, tables.silver, self.stream, self.checkpoint, extra)
            validated = validate_events(batch, extra, expectations=gate.expectations)
            # Only quarantined rows keep their raw line, so the cached batch is a fraction the size.
            invalid_row = F.col("reason").isNotNull()
            validated = persist(validated.withColumn("_raw", F.when(invalid_row, F.col("_raw"))))
            quality, invalid, _ingested = batch_summary(validated, gate)
            rows = quality.rows
            self.tune_for_size(spark, rows)
            gate.check(validated, quality)  # a rule set to fail stops the batch here
            app = self.app_id(spark)
            with self.guard.batch(spark, batch_id) as writes:

                def write() -> None:
                    if invalid:
                        writes.append(quarantined_events(validated), tables.quarantine, app)
                    if rows > invalid:
                        known_ids = self.known_ids
                        found = new_silver_rows(spark, validated, extra, known_ids, persist)
                        merge_schema = bool(extra or schema.unexpected)
                        append_silver(tables, found, merge_schema, known_ids, writes, app)

                if rows:
                    gate.record_beside(writes, quality, app, write)
        finally:
            persist.release()


class GoldHourlyBatch:
    """The ``foreachBatch`` function of ``gold_hourly_product_metrics`` while it catches up on
    silver (a rebuilt gold), or of ``stream`` (a quarantine replay): a batch holds rows silver
    inserted (silver never updates or deletes one), which :func:`write_gold` adds to gold."""

    def __init__(
        self, config: Config, flow: Flow, checkpoint: str, stream: str | None = None
    ) -> None:
        self.tables = tables = EventTables.of(config)
        self.tune_for_size = SizeTuning()
        self.app_id = transaction_app_id(stream or flow.name, checkpoint)
        users = tables.users
        self.known_users = KnownKeys(users, USER_KEY_COLUMNS, kept_keys(checkpoint, users))
        self.guard = ReplayGuard(checkpoint)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        persist = BatchCache()
        try:
            with self.guard.batch(spark, batch_id) as writes:
                events = persist(batch.select(*EVENT_COLUMNS))
                rows = events.count()
                if not rows:
                    return
                self.tune_for_size(spark, rows)
                app = self.app_id(spark)
                write_gold(spark, self.tables, events, self.known_users, persist, writes, app)
        finally:
            persist.release()
