"""What a device reading is: its fields, and why one is refused.

A reading is valid when ``device_id`` is a non-empty string, ``reading_timestamp`` is
ISO-8601 with a zone, ``temperature`` is a JSON number (degrees; kept exactly, as
DECIMAL(18,4)), ``humidity`` is a JSON number from 0 to 100 (percent, DECIMAL(18,4)), and
``status`` is ``ok``, ``warning`` or ``error``. Anything else goes to the quarantine with a
reason naming every rule it breaks.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from medallion.column_stages import built_once
from medallion.contract_rules import Contract
from medallion.contracts import (
    Check,
    FieldRule,
    Stages,
    apply_validation,
    field_text,
    field_value,
)
from medallion.expectations import Expectations
from medallion.transforms.bronze import METADATA_COLUMNS, kafka_position_columns

STATUSES = ("ok", "warning", "error")
FIELDS = (
    FieldRule("device_id", "string", True),
    FieldRule("reading_timestamp", "timestamp", True),
    FieldRule("temperature", "decimal", True),
    FieldRule("humidity", "decimal", True),
    FieldRule("status", "string", True, STATUSES),
)
READING_COLUMNS = ("device_id", "reading_timestamp", "temperature", "humidity", "status")


def _humidity_in_range() -> tuple[Column, Column]:
    humidity = field_value("humidity")
    return (
        F.coalesce((humidity < 0) | (humidity > 100), F.lit(False)),
        F.concat(F.lit("humidity is outside 0..100: "), field_text("humidity")),
    )


READINGS = Contract("device_readings", FIELDS, (Check("humidity_in_range", _humidity_in_range),))


def validate_readings(bronze: DataFrame, expectations: Expectations | None = None) -> DataFrame:
    """Bronze readings plus ``reason`` (NULL when valid), the rules each broke and the typed
    reading columns; ``expectations`` say which broken rules let a reading pass."""
    expectations = expectations or Expectations(READINGS.dataset)
    return apply_validation(
        bronze, _validation(tuple(kafka_position_columns(bronze)), expectations)
    )


@built_once
def _validation(kafka_positions: tuple[str, ...], expectations: Expectations) -> Stages:
    return READINGS.validation_stages(
        expectations,
        [
            field_text("device_id").alias("device_id"),
            field_value("reading_timestamp").alias("reading_timestamp"),
            field_value("temperature").alias("temperature"),
            field_value("humidity").alias("humidity"),
            field_text("status").alias("status"),
            *[F.col(name) for name in (*METADATA_COLUMNS, *kafka_positions)],
        ],
    )
