"""Synthetic device readings: steady readings from a fleet of devices, with the faults a real
feed has (re-sent copies, late readings, invalid values and malformed lines)."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

from medallion.generate import FaultRates, FaultyFeed, write_in_files

DATASET = "device_readings"
_START = datetime(2026, 11, 20, tzinfo=timezone.utc)


def _reading(rng: random.Random, device: int, at: datetime) -> dict:
    base = 18 + device % 7
    return {
        "device_id": f"dev-{device:04d}",
        "reading_timestamp": at.isoformat().replace("+00:00", "Z"),
        "temperature": round(base + rng.gauss(0, 2.5), 2),
        "humidity": round(min(100.0, max(0.0, rng.gauss(45, 12))), 1),
        "status": rng.choices(("ok", "warning", "error"), (90, 8, 2))[0],
    }


def _invalid(rng: random.Random, reading: dict) -> dict:
    broken = dict(reading)
    fault = rng.randrange(5)
    if fault == 0:
        broken["humidity"] = 140.5
    elif fault == 1:
        broken["status"] = "melting"
    elif fault == 2:
        del broken["device_id"]
    elif fault == 3:
        broken["reading_timestamp"] = broken["reading_timestamp"].rstrip("Z")
    else:
        broken["temperature"] = "warm"
    return broken


def reading_lines(records: int, seed: int, faults: FaultRates, devices: int = 50) -> list[str]:
    """``records`` reading lines in arrival order, faults included."""
    rng = random.Random(seed)
    start = _START + timedelta(hours=seed % 97)
    feed = FaultyFeed(rng, faults)
    for n in range(records):
        at = start + timedelta(seconds=n * 2 + rng.randrange(2), milliseconds=rng.randrange(1000))
        at = feed.arrival(at)
        feed.add(_reading(rng, rng.randrange(devices), at), _invalid)
    return feed.lines


def generate(
    landing: str,
    records: int = 1000,
    files: int = 4,
    seed: int = 42,
    faults: FaultRates | None = None,
    device_readings: int | None = None,
    **_other_sizes: int,
) -> dict[str, list[str]]:
    """Write readings to ``landing/device_readings/`` in ``files`` files, landed in name order
    (each file's modification time after the one before). Returns the paths written."""
    count = records if device_readings is None else device_readings
    lines = reading_lines(count, seed, faults or FaultRates())
    return {DATASET: write_in_files(landing, DATASET, f"readings-{seed}", lines, files)}
