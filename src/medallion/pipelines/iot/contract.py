"""What a device reading is: its fields, and why one is refused.

A reading is valid when ``device_id`` is a non-empty string, ``reading_timestamp`` is
ISO-8601 with a zone, ``temperature`` is a JSON number (degrees; kept exactly, as
DECIMAL(18,4)), ``humidity`` is a JSON number from 0 to 100 (percent, DECIMAL(18,4)), and
``status`` is ``ok``, ``warning`` or ``error``. Anything else goes to the quarantine with a
reason naming every rule it breaks.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from medallion.contract_rules import Contract
from medallion.contracts import Check, FieldRule, field_text, field_value
from medallion.pipelines.blocks import validator

FIELDS = (
    FieldRule("device_id", "string", True),
    FieldRule("reading_timestamp", "timestamp", True),
    FieldRule("temperature", "decimal", True),
    FieldRule("humidity", "decimal", True),
    FieldRule("status", "string", True, ("ok", "warning", "error")),
)


def _humidity_out_of_range():
    humidity = field_value("humidity")
    return (
        F.coalesce((humidity < 0) | (humidity > 100), F.lit(False)),
        F.concat(F.lit("humidity is outside 0..100: "), field_text("humidity")),
    )


READINGS = Contract(
    "device_readings", FIELDS, (Check("humidity_in_range", _humidity_out_of_range),)
)
# Bronze readings plus ``reason`` (NULL when valid), the rules each broke and the typed columns.
validate_readings = validator(READINGS)
