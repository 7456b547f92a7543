"""The IoT pipeline's tables."""

from __future__ import annotations

from medallion.declarations import APPEND_ONLY, INGEST_METADATA, KAFKA_METADATA, Table

_READING = (
    "device_id STRING NOT NULL, reading_timestamp TIMESTAMP NOT NULL, "
    "temperature DECIMAL(18,4) NOT NULL, humidity DECIMAL(18,4) NOT NULL, status STRING NOT NULL"
)

BRONZE = Table(
    "bronze",
    "device_readings",
    "device_id STRING, reading_timestamp STRING, temperature STRING, humidity STRING, "
    f"status STRING, {INGEST_METADATA}, {KAFKA_METADATA}",
    APPEND_ONLY,
)
# One row per (device_id, reading_timestamp): the first copy to arrive.
SILVER = Table(
    "silver",
    "device_readings",
    f"{_READING}, _ingested_at TIMESTAMP, _source_file STRING",
    APPEND_ONLY,
    zorder=("device_id", "reading_timestamp"),
)
QUARANTINE = Table(
    "silver",
    "device_readings_quarantine",
    "device_id STRING, reason STRING NOT NULL, _raw STRING, _source_file STRING, "
    "_ingested_at TIMESTAMP",
    quarantine=True,
)
# Each device's newest reading.
STATUS = Table("gold", "device_status", _READING, zorder=("device_id",))
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
