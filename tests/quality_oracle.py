"""Which rules of the events contract each line breaks, computed in plain Python from the
contract's text in docs/governance.md (independent of medallion's Spark expressions): the
oracle of the data-quality log."""

from __future__ import annotations

import json
import re
from decimal import Decimal

from oracle import (
    BLANK,
    EVENT_TYPES,
    FOUR_PLACES,
    TIMESTAMP_HIGH,
    TIMESTAMP_LOW,
    _Duplicate,
    _json_number,
    _no_duplicates,
    _reject_constant,
    parse_timestamp,
)

NO_ZONE = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?")
ANY_OFFSET = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?[+-]\d{2}:\d{2}")


def _structural(line: str) -> tuple[str | None, object]:
    if "\ufffd" in line:
        return "valid_utf8", None
    try:
        doc = json.loads(
            line.removeprefix("\ufeff"),
            object_pairs_hook=_no_duplicates,
            parse_float=_json_number,
            parse_constant=_reject_constant,
        )
    except _Duplicate:
        return "unique_keys", None
    except ValueError:
        return "parseable_json", None
    return (None, doc) if isinstance(doc, dict) else ("json_object", None)


def _required_string(doc: dict, name: str) -> str | None:
    value = doc.get(name)
    if value is None:
        return f"{name}_present"
    if not isinstance(value, str):
        return f"{name}_type"
    return f"{name}_not_empty" if BLANK.fullmatch(value) else None


def _timestamp(text) -> str | None:
    if text is None:
        return "event_timestamp_present"
    if not isinstance(text, str):
        return "event_timestamp_type"
    parsed = parse_timestamp(text)
    if parsed is not None:
        return None if TIMESTAMP_LOW <= parsed < TIMESTAMP_HIGH else "event_timestamp_in_range"
    if NO_ZONE.fullmatch(text):
        return "event_timestamp_has_zone"
    if ANY_OFFSET.fullmatch(text):
        return "event_timestamp_zone_offset"
    return "event_timestamp_iso8601"


def _revenue(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, Decimal, float)):
        return "revenue_type"
    if isinstance(value, float) or not Decimal(value).is_finite():
        return "revenue_finite"
    if value < 0:
        return "revenue_not_negative"
    number = Decimal(value)
    fits = number < Decimal(10) ** 14 and number.quantize(FOUR_PLACES) == number
    return None if fits else "revenue_fits"


def event_rules_broken(line: str, event_types=EVENT_TYPES) -> list[str]:
    """The names of the rules of the events contract that ``line`` breaks."""
    structural, doc = _structural(line)
    if structural:
        return [structural]
    assert isinstance(doc, dict)
    broken = [_required_string(doc, n) for n in ("event_id", "event_type", "user_id", "product_id")]
    event_type = doc.get("event_type")
    if isinstance(event_type, str) and not BLANK.fullmatch(event_type):
        broken.append(None if event_type in event_types else "event_type_allowed")
    category = doc.get("category")
    broken.append(
        "category_type" if category is not None and not isinstance(category, str) else None
    )
    broken.append(_revenue(doc.get("revenue")))
    broken.append(_timestamp(doc.get("event_timestamp")))
    if event_type == "purchase" and doc.get("revenue") is None:
        broken.append("purchase_has_revenue")
    return [rule for rule in broken if rule]
