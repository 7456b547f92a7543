"""IoT device readings: the smallest pipeline, and the tutorial (docs/writing-a-pipeline.md).

Readings land as JSON lines in ``<landing>/device_readings/`` (or the ``device_readings``
topic). Bronze keeps every line; silver keeps the valid ones once per (device, timestamp) and
quarantines the rest; gold keeps each device's latest reading and exact per-minute metrics,
late readings of any age included.
"""

from __future__ import annotations

from medallion.declarations import Flow, Landing, Pipeline
from medallion.pipelines import register
from medallion.pipelines.blocks import (
    IncrementalAggregate,
    LatestPerKey,
    Measure,
    ValidatedAppend,
    bronze_append,
)
from medallion.pipelines.iot import tables as t
from medallion.pipelines.iot.contract import READINGS, validate_readings
from medallion.pipelines.iot.generator import generate
from medallion.pipelines.iot.views import VIEWS

KEY = ("device_id", "reading_timestamp")
METRICS = ("temperature", "humidity")

# Per device and minute: how many readings, each metric's least, greatest and exact sum, and
# the average those give.
MINUTES = IncrementalAggregate(
    ("device_id", ("minute_start", "date_trunc('minute', reading_timestamp)")),
    (
        Measure("readings", "count"),
        *(
            Measure(f"{m}_{kind}", kind, m, "decimal(28,4)" if kind == "sum" else None)
            for m in METRICS
            for kind in ("min", "max", "sum")
        ),
    ),
    tuple((f"{m}_avg", f"CAST({m}_sum AS DOUBLE) / readings") for m in METRICS),
)

IOT = register(
    Pipeline(
        "iot",
        t.TABLES,
        (
            # Every line, unchanged.
            Flow(
                "bronze_device_readings",
                "bronze",
                Landing("device_readings"),
                (t.BRONZE,),
                bronze_append(READINGS),
            ),
            Flow(
                "silver_device_readings",
                "silver",
                t.BRONZE,
                (t.SILVER, t.QUARANTINE),
                batch=ValidatedAppend(READINGS, validate_readings, t.SILVER, t.QUARANTINE, KEY),
            ),
            # A late, older reading never replaces a newer one.
            Flow(
                "gold_device_status",
                "gold",
                t.SILVER,
                (t.STATUS,),
                batch=LatestPerKey(("device_id",), "reading_timestamp"),
            ),
            Flow(
                "gold_device_minute_metrics", "gold", t.SILVER, (t.MINUTE_METRICS,), batch=MINUTES
            ),
        ),
        generate=generate,
        title="Device status",
        views=VIEWS,
    )
)
