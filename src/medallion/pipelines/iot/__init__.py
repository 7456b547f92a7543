"""IoT device readings: the smallest pipeline, and the tutorial (docs/writing-a-pipeline.md).

Readings land as JSON lines in ``<landing>/device_readings/`` (or the ``device_readings``
topic). Bronze keeps every line; silver keeps the valid ones once per (device, timestamp) and
quarantines the rest; gold keeps each device's latest reading and per-minute metrics.
"""

from __future__ import annotations

from functools import partial

from medallion.declarations import Flow, Landing, Pipeline, QuarantineReplay
from medallion.pipelines import register
from medallion.pipelines.iot import batches
from medallion.pipelines.iot import tables as t
from medallion.pipelines.iot.contract import FIELDS, READINGS, validate_readings
from medallion.pipelines.iot.generator import generate
from medallion.pipelines.iot.transforms import KEY
from medallion.pipelines.iot.views import VIEWS
from medallion.streams.sinks import start_bronze_append

IOT = register(
    Pipeline(
        "iot",
        t.TABLES,
        (
            Flow(
                "bronze_device_readings",
                "bronze",
                Landing("device_readings"),
                (t.BRONZE,),
                partial(start_bronze_append, fields=FIELDS),  # every line, unchanged
            ),
            Flow(
                "silver_device_readings",
                "silver",
                t.BRONZE,
                (t.SILVER, t.QUARANTINE),
                batch=batches.ReadingsBatch,
            ),
            Flow("gold_device_status", "gold", t.SILVER, (t.STATUS,), batch=batches.status_batch),
            Flow(
                "gold_device_minute_metrics",
                "gold",
                t.SILVER,
                (t.MINUTE_METRICS,),
                batch=batches.minute_batch,
            ),
        ),
        generate=generate,
        title="Device status",
        views=VIEWS,
        contracts=(READINGS,),
        replays=(
            QuarantineReplay(
                t.QUARANTINE,
                "silver_device_readings",
                READINGS.dataset,
                validate_readings,
                key=KEY,
            ),
        ),
    )
)
