"""Which raw lines are a data subject's, read in plain Python as the contract says: one of the
pipeline's declared subject fields of the parsed line holds the id (a line too malformed to
parse, by its ``"field": "value"`` text). Other fields holding the same text do not count."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

RETAIL_FIELDS = ("customer_id", "user_id")
BANKING_FIELDS = ("account_id",)


def _field_value(line: str, name: str) -> str | None:
    try:
        record = json.loads(line)
    except ValueError:
        found = re.search(rf'"{name}"\s*:\s*"([^"\\]*)"', line)
        return found.group(1) if found and found.group(1) else None
    if not isinstance(record, dict) or record.get(name) is None:
        return None
    value = record[name]
    return value if isinstance(value, str) else json.dumps(value)


def holds_subject(line: str, fields: Iterable[str], subject: str) -> bool:
    """Whether the raw ``line`` is the subject's."""
    return any(_field_value(line, name) == subject for name in fields)
