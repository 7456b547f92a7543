"""The IoT pipeline's streams: how each starts, and what each does with a micro-batch.

Every write is tagged with the stream and the batch id (streams/exactly_once.py), so a batch
replayed after a crash writes nothing twice.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from medallion.config import Config
from medallion.declarations import Flow
from medallion.pipelines.iot import tables as t
from medallion.pipelines.iot.contract import READINGS, validate_readings
from medallion.pipelines.iot.transforms import (
    KEY,
    add_minutes_clauses,
    first_arrivals,
    latest_per_device,
    minute_increments,
    quarantined_readings,
)
from medallion.streams.exactly_once import MergingBatches, ReplayGuard
from medallion.streams.known_keys import KnownKeys, kept_keys
from medallion.streams.quality import QualityGate
from medallion.streams.sinks import transaction_app_id


class ReadingsBatch:
    """The ``foreachBatch`` function of ``silver_device_readings``, or of ``stream`` (a
    quarantine replay): refused readings to the quarantine; valid ones to silver, once per
    (device, timestamp) across all history (the first to arrive), looked up in the stream's
    key index."""

    def __init__(
        self, config: Config, flow: Flow, checkpoint: str, stream: str | None = None
    ) -> None:
        stream = stream or flow.name
        self.silver, self.quarantine = config.table(t.SILVER.key), config.table(t.QUARANTINE.key)
        self.app_id = transaction_app_id(stream, checkpoint)
        self.known = KnownKeys(self.silver, KEY, kept_keys(checkpoint, self.silver))
        self.guard = ReplayGuard(checkpoint)
        self.gate = QualityGate(config, stream, READINGS, t.SILVER.key)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        spark, gate = batch.sparkSession, self.gate
        validated = validate_readings(batch, gate.expectations).persist()
        firsts = first_arrivals(validated).persist()
        try:
            quality, (invalid,) = gate.measure(validated, F.count_if(F.col("reason").isNotNull()))
            gate.check(validated, quality)  # a rule set to fail stops the batch here
            with self.guard.batch(spark, batch_id) as writes:
                app = self.app_id(spark)

                def write() -> None:
                    if invalid:
                        writes.append(quarantined_readings(validated), self.quarantine, app)
                    unseen, hashes = self.known.new_rows(spark, firsts)
                    if len(hashes[0]):
                        writes.append(unseen, self.silver, app)
                        self.known.added(spark, hashes, writes.tag(app))

                gate.record_beside(writes, quality, app, write)
        finally:
            firsts.unpersist()
            validated.unpersist()


# A late, older reading never replaces a newer one.
_NEWER_READING_WINS = (
    "WHEN MATCHED AND s.reading_timestamp > t.reading_timestamp THEN UPDATE SET * "
    "WHEN NOT MATCHED THEN INSERT *"
)
# Each device's newest reading of the batch, merged over an older one only.
status_batch = MergingBatches(latest_per_device, ("device_id",), _NEWER_READING_WINS)
# The batch's readings (new to silver, which only appends) added to their minutes' rows,
# however old the minute.
minute_batch = MergingBatches(
    minute_increments, ("device_id", "minute_start"), add_minutes_clauses()
)
