"""IoT device readings: the smallest of the pipelines medallion ships.

Readings land as JSON lines in ``<landing>/device_readings/`` (or the ``device_readings``
topic). A reading is valid when ``device_id`` is a non-empty string, ``reading_timestamp`` is
ISO-8601 with a zone, ``temperature`` is a JSON number (degrees; kept exactly, as
DECIMAL(18,4)), ``humidity`` is a JSON number from 0 to 100 (percent, DECIMAL(18,4)), and
``status`` is ``ok``, ``warning`` or ``error``. Bronze keeps every line; silver keeps the valid
ones once per (device, timestamp) and quarantines the rest with a reason naming every rule
they break; gold keeps each device's latest reading and exact per-minute metrics, late
readings of any age included.
"""

from __future__ import annotations

from medallion.declarations import Flow, Pipeline, Table
from medallion.pipelines import register
from medallion.pipelines.blocks import (
    Contract,
    FieldRule,
    IncrementalAggregate,
    LatestPerKey,
    Measure,
    ValidatedDataset,
    range_check,
)
from medallion.pipelines.iot.generator import generate
from medallion.pipelines.iot.views import VIEWS

READINGS = Contract(
    "device_readings",
    (
        FieldRule("device_id", "string", True),
        FieldRule("reading_timestamp", "timestamp", True),
        FieldRule("temperature", "decimal", True),
        FieldRule("humidity", "decimal", True),
        FieldRule("status", "string", True, ("ok", "warning", "error")),
    ),
    (range_check("humidity", 0, 100),),
)
# Bronze, silver (one row per key: the first copy to arrive) and the quarantine, and their flows.
DEVICE_READINGS = ValidatedDataset(READINGS, ("device_id", "reading_timestamp"))
SILVER = DEVICE_READINGS.silver

# Each device's newest reading: a late, older reading never replaces a newer one.
STATUS = Table(
    "gold", "device_status", SILVER.schema.rsplit(", _ingested_at", 1)[0], zorder=("device_id",)
)
NEWEST = LatestPerKey(("device_id",), "reading_timestamp")

# Per device and minute: how many readings, each metric's least, greatest and exact sum, and
# the average those give.
MINUTE_METRICS = Table(
    "gold",
    "device_minute_metrics",
    "device_id STRING NOT NULL, minute_start TIMESTAMP NOT NULL, readings BIGINT NOT NULL, "
    "temperature_min DECIMAL(18,4) NOT NULL, temperature_max DECIMAL(18,4) NOT NULL, "
    "temperature_sum DECIMAL(28,4) NOT NULL, humidity_min DECIMAL(18,4) NOT NULL, "
    "humidity_max DECIMAL(18,4) NOT NULL, humidity_sum DECIMAL(28,4) NOT NULL, "
    "temperature_avg DOUBLE NOT NULL, humidity_avg DOUBLE NOT NULL",
    zorder=("device_id", "minute_start"),
)
METRICS = ("temperature", "humidity")
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
        (*DEVICE_READINGS.tables, STATUS, MINUTE_METRICS),
        (
            *DEVICE_READINGS.flows,
            Flow("gold_device_status", "gold", SILVER, (STATUS,), batch=NEWEST),
            Flow("gold_device_minute_metrics", "gold", SILVER, (MINUTE_METRICS,), batch=MINUTES),
        ),
        generate=generate,
        title="Device status",
        views=VIEWS,
    )
)
