"""The IoT pipeline computed in plain Python from the landed files: what silver and gold must
hold. Independent of Spark: it parses and validates each line by the contract itself."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

STATUSES = ("ok", "warning", "error")
LOW, HIGH = datetime(1900, 1, 1, tzinfo=timezone.utc), datetime(2200, 1, 1, tzinfo=timezone.utc)


def _number(value: object) -> Decimal | None:
    if not isinstance(value, Decimal):
        return None
    exact = value.normalize()
    if exact.as_tuple().exponent < -4 or abs(exact) >= Decimal(10) ** 14:
        return None
    return value


def _timestamp(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    parsed = parsed.astimezone(timezone.utc)
    return parsed if LOW <= parsed < HIGH else None


def parse(line: str, any_humidity: bool = False) -> dict | None:
    """The typed reading of a valid line, or None when the contract refuses it; with
    ``any_humidity``, a humidity outside 0 to 100 passes (``humidity_in_range`` set to warn)."""
    try:
        doc = json.loads(line, parse_float=Decimal, parse_int=Decimal)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    device, status = doc.get("device_id"), doc.get("status")
    at = _timestamp(doc.get("reading_timestamp"))
    temperature, humidity = _number(doc.get("temperature")), _number(doc.get("humidity"))
    if not isinstance(device, str) or not device.strip() or status not in STATUSES:
        return None
    if at is None or temperature is None or humidity is None:
        return None
    if not any_humidity and not 0 <= humidity <= 100:
        return None
    return {
        "device_id": device,
        "reading_timestamp": at,
        "temperature": temperature,
        "humidity": humidity,
        "status": status,
    }


@dataclass
class Expected:
    silver: dict[tuple[str, datetime], dict] = field(default_factory=dict)
    quarantined: int = 0

    def status(self) -> dict[str, dict]:
        latest: dict[str, dict] = {}
        for reading in self.silver.values():
            held = latest.get(reading["device_id"])
            if held is None or reading["reading_timestamp"] > held["reading_timestamp"]:
                latest[reading["device_id"]] = reading
        return latest

    def minutes(self) -> dict[tuple[str, datetime], dict]:
        rows: dict[tuple[str, datetime], dict] = {}
        for r in self.silver.values():
            minute = r["reading_timestamp"].replace(second=0, microsecond=0)
            row = rows.setdefault((r["device_id"], minute), {"readings": 0})
            row["readings"] += 1
            for metric in ("temperature", "humidity"):
                value = r[metric]
                row[f"{metric}_min"] = min(row.get(f"{metric}_min", value), value)
                row[f"{metric}_max"] = max(row.get(f"{metric}_max", value), value)
                row[f"{metric}_sum"] = row.get(f"{metric}_sum", Decimal(0)) + value
        for row in rows.values():
            for metric in ("temperature", "humidity"):
                row[f"{metric}_avg"] = float(row[f"{metric}_sum"]) / row["readings"]
        return rows


def expected_from(
    landing: Path, any_humidity: bool = False, dataset: str = "device_readings"
) -> Expected:
    """Every file of ``landing/<dataset>``, in name order (the order they landed)."""
    expected = Expected()
    for path in sorted((landing / dataset).glob("*.json")):
        for line in path.read_text(encoding="utf-8").split("\n"):
            if not line.strip():
                continue
            reading = parse(line, any_humidity)
            if reading is None:
                expected.quarantined += 1
                continue
            key = (reading["device_id"], reading["reading_timestamp"])
            expected.silver.setdefault(key, reading)
    return expected
