"""The IoT pipeline's streams: how each starts, and what each does with a micro-batch.

Every write is tagged with the stream and the batch id (streams/exactly_once.py), so a batch
replayed after a crash writes nothing twice.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from medallion.config import Config
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
from medallion.streams.exactly_once import ReplayGuard, merging_batches
from medallion.streams.known_keys import HASH_COLUMNS, KnownKeys, kept_keys
from medallion.streams.quality import QualityGate
from medallion.streams.sinks import transaction_app_id

Batch = Callable[[DataFrame, int], None]


def silver_batch(config: Config, checkpoint: str, stream: str | None = None) -> Batch:
    """Refused readings to the quarantine; valid ones to silver, once per (device, timestamp)
    across all history (the first to arrive), looked up in the stream's key index. ``stream``
    names another writer than ``silver_device_readings`` (a quarantine replay)."""
    stream = stream or "silver_device_readings"
    silver, quarantine = config.table(t.SILVER.key), config.table(t.QUARANTINE.key)
    app_id = transaction_app_id(stream, checkpoint)
    known = KnownKeys(silver, KEY, kept_keys(checkpoint, silver))
    guard = ReplayGuard(checkpoint)
    gate = QualityGate(config, stream, READINGS, t.SILVER.key)

    def process(batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        validated = validate_readings(batch, gate.expectations).persist()
        firsts = first_arrivals(validated).persist()
        try:
            quality, (invalid,) = gate.measure(validated, F.count_if(F.col("reason").isNotNull()))
            gate.check(validated, quality)  # a rule set to fail stops the batch here
            with guard.batch(spark, batch_id) as writes:
                app = app_id(spark)

                def write() -> None:
                    if invalid:
                        writes.append(quarantined_readings(validated), quarantine, app)
                    unseen, hashes = known.new_rows(spark, firsts)
                    if len(hashes[0]):
                        writes.append(unseen.drop(*HASH_COLUMNS), silver, app)
                        known.added(spark, hashes, writes.tag(app))

                gate.record_beside(writes, quality, app, write)
        finally:
            firsts.unpersist()
            validated.unpersist()

    return process


# A late, older reading never replaces a newer one.
_NEWER_READING_WINS = (
    "WHEN MATCHED AND s.reading_timestamp > t.reading_timestamp THEN UPDATE SET * "
    "WHEN NOT MATCHED THEN INSERT *"
)
# Each device's newest reading of the batch, merged over an older one only.
status_batch = merging_batches(
    "gold_device_status", t.STATUS.key, latest_per_device, ["device_id"], _NEWER_READING_WINS
)
# The batch's readings (new to silver, which only appends) added to their minutes' rows,
# however old the minute.
minute_batch = merging_batches(
    "gold_device_minute_metrics",
    t.MINUTE_METRICS.key,
    minute_increments,
    ["device_id", "minute_start"],
    add_minutes_clauses(),
)
