"""The IoT pipeline's tables: bronze, silver and the quarantine declared from the contract."""

from __future__ import annotations

from medallion.declarations import Table
from medallion.pipelines.blocks import bronze_table, quarantine_table, silver_table
from medallion.pipelines.iot.contract import READINGS

BRONZE = bronze_table(READINGS)
# One row per (device_id, reading_timestamp): the first copy to arrive.
SILVER = silver_table(READINGS, zorder=("device_id", "reading_timestamp"))
QUARANTINE = quarantine_table(READINGS, "device_id")
# Each device's newest reading.
STATUS = Table(
    "gold", "device_status", SILVER.schema.rsplit(", _ingested_at", 1)[0], zorder=("device_id",)
)
# Per device and minute: count, least, greatest, exact sum and average of each metric.
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

TABLES = (BRONZE, SILVER, QUARANTINE, STATUS, MINUTE_METRICS)
