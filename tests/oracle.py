"""An independent, plain-Python reading of the input contract (no Spark).

The tests compare every table the pipeline writes with what this module computes from the
landed files alone.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation
from pathlib import Path

EVENT_TYPES = {"view", "add_to_cart", "purchase"}
BLANK = re.compile(r"[ \t\n\x0b\f\r]*")
TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})", re.ASCII)
# A zone offset is at most 18 hours either way (Java's ZoneOffset), with minutes 00-59.
MAX_OFFSET_MINUTES = 18 * 60
FOUR_PLACES = Decimal("0.0001")


class _Duplicate(ValueError):
    pass


def _no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise _Duplicate()
    return dict(pairs)


def _reject_constant(name):
    raise ValueError(name)


def read_file_lines(path: Path) -> list[str]:
    """The records of one file, each as README promises bronze keeps it in ``_raw``: the file
    decoded as UTF-8 (bytes that are not UTF-8 read as U+FFFD, as Spark shows them), split at
    LF only, one trailing CR (a CRLF ending) removed, and blank lines (empty, or only space,
    TAB, LF, VT, FF and CR) dropped. Everything else is kept as landed: a final line without
    its LF, other CRs, and a leading byte-order mark, except the one that starts the file: that
    is the file's encoding mark, which Spark's text reader drops (README)."""
    data = path.read_bytes()
    text = data.removeprefix(b"\xef\xbb\xbf").decode("utf-8", errors="replace")
    lines = (line[:-1] if line.endswith("\r") else line for line in text.split("\n"))
    return [line for line in lines if not BLANK.fullmatch(line)]


def read_lines(directory: Path) -> list[tuple[str, str]]:
    """(file, line) for every record of the visible files (:func:`read_file_lines`), files in
    name order, which is the order in which the tests land them (``generate`` makes their
    modification times follow it), so the order in which they arrive."""
    return [
        (str(path), line)
        for path in sorted(directory.iterdir())
        if path.is_file() and not path.name.startswith((".", "_"))
        for line in read_file_lines(path)
    ]


TIMESTAMP_LOW, TIMESTAMP_HIGH = (
    datetime(1900, 1, 1, tzinfo=timezone.utc),
    datetime(2200, 1, 1, tzinfo=timezone.utc),
)


def plausible_timestamp(text: str) -> datetime | None:
    """The UTC datetime when the text is a valid timestamp within the contract's range."""
    ts = parse_timestamp(text)
    return ts if ts is not None and TIMESTAMP_LOW <= ts < TIMESTAMP_HIGH else None


def parse_timestamp(text: str) -> datetime | None:
    """The UTC datetime of an ISO-8601 timestamp with a zone, else None."""
    match = TIMESTAMP.fullmatch(text)
    if not match:
        return None
    zone = match.group(2)
    if zone != "Z":
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        if minutes > 59 or hours * 60 + minutes > MAX_OFFSET_MINUTES:
            return None
    head, _, rest = text.partition(".")
    if rest:  # keep microseconds, as Spark does
        digits = re.match(r"\d+", rest).group(0)
        text = f"{head}.{(digits + '000000')[:6]}{rest[len(digits) :]}"
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)
    except ValueError:
        return None


def event_is_valid(line: str, event_types: set[str] | None = EVENT_TYPES) -> dict | None:
    """The event as a dict of silver values when the line is a valid event, else None; with
    ``event_types`` None, any event type is accepted (``event_type_allowed`` set to warn)."""
    doc = strict_object(line)
    if doc is None:
        return None
    for key in ("event_id", "event_type", "user_id", "product_id"):
        value = doc.get(key)
        if not isinstance(value, str) or BLANK.fullmatch(value):
            return None
    if event_types is not None and doc["event_type"] not in event_types:
        return None
    category = doc.get("category")
    if category is not None and not isinstance(category, str):
        return None
    ts_text = doc.get("event_timestamp")
    if not isinstance(ts_text, str):
        return None
    ts = plausible_timestamp(ts_text)
    if ts is None:
        return None
    revenue = doc.get("revenue")
    if revenue is not None:
        if isinstance(revenue, bool) or not isinstance(revenue, (int, Decimal)):
            return None
        revenue = Decimal(revenue)
        if not revenue.is_finite() or revenue < 0:
            return None
        # At most 14 integer digits (checked first: quantize and float cannot hold every larger
        # number) and at most 4 decimals, whatever the notation (``1e2`` is 100.0000).
        if revenue >= Decimal(10) ** 14 or revenue.quantize(FOUR_PLACES) != revenue:
            return None
        revenue = revenue.quantize(FOUR_PLACES)
    elif doc["event_type"] == "purchase":
        return None
    return {
        "event_id": doc["event_id"],
        "event_type": doc["event_type"],
        "user_id": doc["user_id"],
        "product_id": doc["product_id"],
        "category": category,
        "revenue": revenue,
        "event_timestamp": ts.replace(tzinfo=None),
        "event_date": ts.date(),
    }


@dataclass
class Expected:
    """What the pipeline must produce from a landing folder."""

    bronze_lines: int = 0
    bronze_raw: list[str] = field(default_factory=list)
    silver: dict[str, dict] = field(default_factory=dict)
    quarantined: list[str] = field(default_factory=list)
    gold: dict[tuple[datetime, str], dict] = field(default_factory=dict)


def missing_first(value) -> tuple:
    """A sort key for an optional value: a missing one (None, Spark's NULL) first."""
    return (value is not None, value if value is not None else "")


def event_content_key(event: dict) -> tuple:
    """The order of copies of one ``event_id`` that arrived together (lines of one file):
    README's tie-break, the least copy wins."""
    return (
        event["event_timestamp"],
        event["event_type"],
        event["user_id"],
        event["product_id"],
        missing_first(event["category"]),
        missing_first(event["revenue"]),
    )


def expected_from(landing: Path, event_types: set[str] | None = EVENT_TYPES) -> Expected:
    """Compute bronze, silver, quarantine and gold from the files under ``landing/events``, with
    ``event_types`` the accepted ones (None: any). An event of another type than the three
    counts in no metric of gold, but its user counts in ``unique_users``.

    Silver keeps the first arrival of each ``event_id``: the copy in the first file (files
    arrive in name order, see :func:`read_lines`); among copies in that one file, which bronze
    keeps no line position for, the least by :func:`event_content_key`.
    """
    result = Expected()
    lines = read_lines(landing / "events") if (landing / "events").exists() else []
    result.bronze_lines = len(lines)
    result.bronze_raw = [line for _, line in lines]
    first_file: dict[str, str] = {}
    for file, line in lines:
        event = event_is_valid(line, event_types)
        if event is None:
            result.quarantined.append(line)
            continue
        event_id = event["event_id"]
        if event_id not in result.silver:
            result.silver[event_id], first_file[event_id] = event, file
        elif first_file[event_id] == file and event_content_key(event) < event_content_key(
            result.silver[event_id]
        ):
            result.silver[event_id] = event
    users: dict[tuple[datetime, str], set[str]] = defaultdict(set)
    for event in result.silver.values():
        hour = event["event_timestamp"].replace(minute=0, second=0, microsecond=0)
        key = (hour, event["product_id"])
        row = result.gold.setdefault(
            key,
            {"views": 0, "add_to_carts": 0, "purchases": 0, "revenue": Decimal("0.0000")},
        )
        kind = {"view": "views", "add_to_cart": "add_to_carts", "purchase": "purchases"}.get(
            event["event_type"]
        )
        if kind:
            row[kind] += 1
        if event["event_type"] == "purchase":
            row["revenue"] += event["revenue"]
        users[key].add(event["user_id"])
    for key, row in result.gold.items():
        row["unique_users"] = len(users[key])
        row["window_end"] = key[0] + timedelta(hours=1)
    return result


def as_date(value) -> date:
    return value if isinstance(value, date) else date.fromisoformat(str(value))


OPERATIONS = {"INSERT", "UPDATE", "DELETE"}
OPERATION_RANK = {"INSERT": 1, "UPDATE": 2, "DELETE": 3}
CUSTOMER_STATE_FIELDS = (
    "customer_id",
    "name",
    "email",
    "country",
    "segment",
    "sequence_num",
    "updated_at",
    "operation",
)


def _json_number(text: str) -> Decimal | float:
    """A JSON number with a fraction or an exponent, exactly. When its exponent is beyond what
    Decimal holds: 0 if its digits are all zeros, else a float (inf or 0.0), which is no valid
    money (far too large, or far too many decimals)."""
    try:
        return Decimal(text)
    except InvalidOperation:
        mantissa = re.split("[eE]", text)[0]
        return Decimal(0) if not mantissa.strip("-0.") else float(text)


def strict_object(line: str):
    if "\ufffd" in line:  # bytes that were not UTF-8
        return None
    try:
        doc = json.loads(
            # One byte-order mark is ignored; a second one is not JSON.
            line.removeprefix("\ufeff"),
            object_pairs_hook=_no_duplicates,
            parse_float=_json_number,
            parse_constant=_reject_constant,
        )
    except (ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


def customer_change(line: str) -> dict | None:
    """The change as a dict when the line is a valid customer change, else None."""
    doc = strict_object(line)
    if doc is None:
        return None
    customer_id = doc.get("customer_id")
    if not isinstance(customer_id, str) or BLANK.fullmatch(customer_id):
        return None
    for key in ("name", "email", "country", "segment"):
        if doc.get(key) is not None and not isinstance(doc[key], str):
            return None
    if doc.get("operation") not in OPERATIONS:
        return None
    sequence = doc.get("sequence_num")
    if (
        isinstance(sequence, bool)
        or not isinstance(sequence, int)
        or not -(2**63) <= sequence < 2**63
    ):
        return None
    updated_at = (
        plausible_timestamp(doc["updated_at"]) if isinstance(doc.get("updated_at"), str) else None
    )
    if updated_at is None:
        return None
    change = {
        key: doc.get(key)
        for key in ("customer_id", "name", "email", "country", "segment", "operation")
    }
    change.update(sequence_num=sequence, updated_at=updated_at.replace(tzinfo=None))
    return change


def sequence_key(change: dict) -> tuple:
    """(``sequence_num``, operation rank, ``updated_at``): README's order of changes, and all a
    tombstone can be compared by."""
    return (change["sequence_num"], OPERATION_RANK[change["operation"]], change["updated_at"])


def change_key(change: dict) -> tuple:
    """README's order of the changes of one customer: :func:`sequence_key`, then the content
    (name, email, country, segment, a missing value lowest); the greatest change wins, so
    changes that tie on the sequence key are decided by content, never by arrival."""
    content = tuple(missing_first(change[name]) for name in ("name", "email", "country", "segment"))
    return (sequence_key(change), *content)


@dataclass
class ExpectedCustomers:
    """What the customer streams must produce.

    ``tombstones``: ``silver/customer_tombstones`` exactly, each deleted customer's newest
    DELETE as (``sequence_num``, ``updated_at``).
    """

    bronze_lines: int = 0
    bronze_raw: list[str] = field(default_factory=list)
    state: dict[str, dict] = field(default_factory=dict)
    quarantined: list[str] = field(default_factory=list)
    tombstones: dict[str, tuple[int, datetime]] = field(default_factory=dict)


def expected_customers(landing: Path) -> ExpectedCustomers:
    """The current customer state: each customer's newest change (:func:`change_key`), unless
    it is a DELETE; and what ``silver/customer_tombstones`` may hold.

    Tombstones: every customer that has a DELETE keeps its newest one, by (``sequence_num``,
    ``updated_at``), whether or not a newer change followed it: silver_customers records each
    customer's newest DELETE of every batch, so the table does not depend on batching.
    """
    result = ExpectedCustomers()
    folder = landing / "customers"
    lines = read_lines(folder) if folder.exists() else []
    result.bronze_lines = len(lines)
    result.bronze_raw = [line for _, line in lines]
    newest: dict[str, dict] = {}
    for _, line in lines:
        change = customer_change(line)
        if change is None:
            result.quarantined.append(line)
            continue
        cid = change["customer_id"]
        if change["operation"] == "DELETE":
            deleted = (change["sequence_num"], change["updated_at"])
            result.tombstones[cid] = max(result.tombstones.get(cid, deleted), deleted)
        if cid not in newest or change_key(change) > change_key(newest[cid]):
            newest[cid] = change
    result.state = {cid: c for cid, c in newest.items() if c["operation"] != "DELETE"}
    return result


def expected_daily_revenue(
    silver: dict[str, dict], country_of: Callable[[dict], str | None]
) -> dict[tuple, dict]:
    """Revenue and purchases per (event_date, country), each purchase under the country
    ``country_of(purchase)`` gives it (``unknown`` for None)."""
    out: dict[tuple, dict] = {}
    for event in silver.values():
        if event["event_type"] != "purchase":
            continue
        country = country_of(event) or "unknown"
        row = out.setdefault(
            (event["event_date"], country), {"revenue": Decimal("0.0000"), "purchases": 0}
        )
        row["revenue"] += event["revenue"]
        row["purchases"] += 1
    return out
