"""Synthetic retail input: events with every fault (re-sent copies, late events, invalid and
malformed lines, CRLF files) and customer changes (out of order, tied, deleted)."""

from __future__ import annotations

import json
import os
import random
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

from medallion.generate import FaultRates, split_evenly, write_file_atomically

EVENT_WEIGHTS = (("view", 0.70), ("add_to_cart", 0.20), ("purchase", 0.10))
CATEGORIES = ("books", "games", "garden", "kitchen", "music", "toys")
COUNTRIES = ("DE", "FR", "GB", "IN", "JP", "US")
SEGMENTS = ("consumer", "smb", "enterprise")
BASE_TIME = datetime(2026, 11, 20, tzinfo=timezone.utc)


def _iso(ts: datetime, rng: random.Random) -> str:
    """An ISO-8601 timestamp with a random fraction precision and zone style."""
    style = rng.randrange(4)
    if style == 0:
        return ts.strftime("%Y-%m-%dT%H:%M:%SZ")
    if style == 1:
        return ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"
    offset = timedelta(hours=rng.choice((-8, -5, 1, 5)), minutes=rng.choice((0, 30)))
    local = ts.astimezone(timezone(offset))
    fraction = f".{local.microsecond:06d}" if style == 2 else ""
    sign = "+" if offset >= timedelta(0) else "-"
    minutes = int(abs(offset).total_seconds() // 60)
    return (
        local.strftime("%Y-%m-%dT%H:%M:%S")
        + fraction
        + f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"
    )


def _event(rng: random.Random, n: int, seed: int, users: int, products: int, late: bool) -> dict:
    kinds, weights = zip(*EVENT_WEIGHTS, strict=True)
    event_type = rng.choices(kinds, weights)[0]
    ts = BASE_TIME + timedelta(seconds=rng.randrange(48 * 3600), microseconds=rng.randrange(10**6))
    if late:
        ts -= timedelta(days=rng.randint(1, 30), hours=rng.randrange(24))
    record = {
        "event_id": f"e-{seed}-{n:08d}",
        "event_type": event_type,
        "user_id": f"c{rng.randrange(users):05d}",
        "product_id": f"p{rng.randrange(products):04d}",
        "event_timestamp": _iso(ts, rng),
    }
    if rng.random() < 0.9:
        record["category"] = rng.choice(CATEGORIES)
    if event_type == "purchase":
        record["revenue"] = round(rng.uniform(1, 500), 2)
    return record


def _altered_copy(line: str, rng: random.Random, users: int, products: int) -> str:
    """A re-send of ``line`` (a valid event) that is still valid but not identical: the same
    ``event_id`` with one or two of timestamp, product, user, category and revenue changed."""
    record = json.loads(line)
    fields = ["event_timestamp", "product_id", "user_id", "category"]
    if record["event_type"] == "purchase":
        fields.append("revenue")
    for name in rng.sample(fields, rng.randint(1, 2)):
        if name == "event_timestamp":
            shift = timedelta(seconds=rng.randrange(48 * 3600), microseconds=rng.randrange(10**6))
            record[name] = _iso(BASE_TIME + shift, rng)
        elif name == "product_id":
            record[name] = f"p{rng.randrange(products):04d}"
        elif name == "user_id":
            record[name] = f"c{rng.randrange(users):05d}"
        elif name == "category":
            if "category" in record and rng.random() < 0.5:
                del record["category"]  # the first copy had one, this one has none
            else:
                record["category"] = rng.choice(CATEGORIES)
        else:
            record["revenue"] = round(rng.uniform(1, 500), 2)
    return json.dumps(record)


# Each function breaks one rule of the contract; the list is the invalid-record knob.
_INVALID_MUTATIONS = (
    lambda r: r.pop("user_id"),
    lambda r: r.pop("event_id"),
    lambda r: r.update(event_type="refund"),
    lambda r: r.update(revenue=str(r.get("revenue", "12.50"))),
    lambda r: r.update(event_timestamp=r["event_timestamp"][:19]),
    lambda r: r.update(event_timestamp="yesterday"),
    lambda r: r.update(product_id=""),
    lambda r: r.update(user_id=12345),
    lambda r: r.update(event_type="purchase", revenue=None),
    lambda r: r.update(event_type="purchase", revenue=-5),
)

_MALFORMED = (
    lambda line: line[: max(1, len(line) // 2)],
    lambda line: line.replace('":', '"', 1),
    lambda line: "not json at all",
    lambda line: "[" + line + "]",
    lambda line: line + "}",
)


def generate_event_lines(
    events: int, seed: int, users: int = 200, products: int = 50, faults: FaultRates | None = None
) -> Iterator[str]:
    """The JSON lines of ``events`` generated events (plus re-sent duplicates), in order."""
    faults = faults or FaultRates()
    rng = random.Random(seed)
    sent: list[str] = []
    for n in range(events):
        record = _event(rng, n, seed, users, products, late=rng.random() < faults.late)
        if rng.random() < faults.extra_fields:
            record["client"] = {"app": "web", "version": rng.randint(1, 9)}
            record["session_id"] = str(uuid.UUID(int=rng.getrandbits(128)))
        roll = rng.random()
        if roll < faults.invalid:
            rng.choice(_INVALID_MUTATIONS)(record)
            line = json.dumps(record)
        elif roll < faults.invalid + faults.malformed:
            line = rng.choice(_MALFORMED)(json.dumps(record))
        else:
            line = json.dumps(record)
            sent.append(line)
        yield line
        if sent and rng.random() < faults.duplicate:
            copy = rng.choice(sent)  # sent earlier: in this file or in an earlier one
            if faults.altered_duplicate and rng.random() < faults.altered_duplicate:
                copy = _altered_copy(copy, rng, users, products)
            yield copy
        if rng.random() < faults.blank_lines:
            yield ""


def _tied_change(change: dict, ts: datetime, rng: random.Random) -> dict:
    """A twin of ``change`` that ties with it on (``sequence_num``, operation, ``updated_at``)
    (the same instant, possibly written in another zone) but differs in content."""
    twin = {**change, "updated_at": _iso(ts, rng)}
    for name in rng.sample(("name", "email", "country", "segment"), rng.randint(1, 2)):
        if rng.random() < 0.2:
            twin[name] = None
        elif name == "country":
            twin[name] = rng.choice([c for c in COUNTRIES if c != change[name]])
        elif name == "segment":
            twin[name] = rng.choice([s for s in SEGMENTS if s != change[name]])
        else:
            twin[name] = f"{rng.choice(('a', 'z'))}-{change[name]}"
    return twin


def generate_customer_lines(
    customers: int, seed: int, faults: FaultRates | None = None
) -> Iterator[str]:
    """Customer change records: inserts, updates and deletes, shuffled and partly duplicated;
    ``faults.tied_changes`` of them come with a tied twin of other content."""
    faults = faults or FaultRates()
    rng = random.Random(seed + 1)
    changes: list[dict] = []

    def add(change: dict, ts: datetime) -> None:
        changes.append(change)
        if rng.random() < faults.tied_changes:
            changes.append(_tied_change(change, ts, rng))

    for c in range(customers):
        customer_id = f"c{c:05d}"
        sequence = rng.randint(1, 5)
        state = {
            "customer_id": customer_id,
            "name": f"Customer {c}",
            "email": f"customer{c}@example.com",
            "country": rng.choice(COUNTRIES),
            "segment": rng.choice(SEGMENTS),
        }
        ts = BASE_TIME - timedelta(days=60) + timedelta(minutes=c)
        add(
            {**state, "operation": "INSERT", "sequence_num": sequence, "updated_at": _iso(ts, rng)},
            ts,
        )
        for _ in range(rng.choice((0, 0, 1, 2, 3))):
            sequence += rng.randint(1, 3)
            ts += timedelta(hours=rng.randint(1, 200))
            operation = "DELETE" if rng.random() < 0.15 else "UPDATE"
            if operation == "UPDATE":
                state = {**state, "country": rng.choice(COUNTRIES), "segment": rng.choice(SEGMENTS)}
            add(
                {
                    **state,
                    "operation": operation,
                    "sequence_num": sequence,
                    "updated_at": _iso(ts, rng),
                },
                ts,
            )
    rng.shuffle(changes)
    lines = [json.dumps(change) for change in changes]
    lines += [rng.choice(lines) for _ in range(len(lines) // 20)]
    invalid = [
        {
            "name": "no key",
            "operation": "INSERT",
            "sequence_num": 1,
            "updated_at": "2026-11-01T00:00:00Z",
        },
        {
            "customer_id": "c99999",
            "operation": "UPSERT",
            "sequence_num": 1,
            "updated_at": "2026-11-01T00:00:00Z",
        },
        {
            "customer_id": "c99998",
            "operation": "UPDATE",
            "sequence_num": "7",
            "updated_at": "2026-11-01T00:00:00Z",
        },
        {"customer_id": "c99997", "operation": "UPDATE", "updated_at": "2026-11-01T00:00:00Z"},
    ]
    lines += [json.dumps(record) for record in invalid] + ['{"customer_id": "c0000']
    rng.shuffle(lines)
    return iter(lines)


def generate(
    landing: str,
    events: int = 1000,
    customers: int = 200,
    files: int = 4,
    seed: int = 42,
    faults: FaultRates | None = None,
) -> dict[str, list[str]]:
    """Write events to ``landing/events/`` and customer changes to ``landing/customers/``.

    Returns the written file paths per dataset. File names carry the seed, so several
    generations with different seeds add new files instead of replacing old ones. Files land in
    name order, each with a later modification time (in milliseconds) than the one before, so
    the file source reads them in name order however it cuts its micro-batches: that is the
    arrival order in which "first arrival wins" is decided, and the one tests/oracle.py assumes.
    """
    faults = faults or FaultRates()
    rng = random.Random(seed + 2)
    written: dict[str, list[str]] = {"events": [], "customers": []}
    last_mtime: list[int] = []

    def write(dataset: str, name: str, lines: list[str], crlf: bool = False) -> None:
        path = write_file_atomically(
            f"{landing}/{dataset}", name, lines, crlf, last_mtime[-1] if last_mtime else None
        )
        last_mtime.append(os.stat(path).st_mtime_ns)
        written[dataset].append(path)

    users = max(customers, 1)
    event_lines = list(generate_event_lines(events, seed, users=users, faults=faults))
    for i, chunk in enumerate(split_evenly(event_lines, max(files, 1))):
        crlf = rng.random() < faults.crlf_files
        write("events", f"events-{seed}-{i:05d}.json", chunk, crlf)
    if faults.empty_file:
        write("events", f"events-{seed}-empty.json", [])
    if customers:
        customer_lines = list(generate_customer_lines(customers, seed, faults))
        for i, chunk in enumerate(split_evenly(customer_lines, max(1, min(files, 4)))):
            write("customers", f"customers-{seed}-{i:05d}.json", chunk)
    return written


def generate_sized(
    landing: str,
    records: int = 1000,
    files: int = 4,
    seed: int = 42,
    faults: FaultRates | None = None,
    customers: int = 200,
    events: int | None = None,
    **_other_sizes: int,
) -> dict[str, list[str]]:
    """:func:`generate` as ``medallion generate`` calls a pipeline's generator: ``events``
    events (default ``records``) and ``customers`` customer changes."""
    return generate(landing, records if events is None else events, customers, files, seed, faults)
