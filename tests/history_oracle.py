"""A plain-Python reading of customer history (SCD type 2, issue 30) and of the change in force
at a time: what medallion/transforms/history.py must produce, written from the contract alone.

Changes are dicts with ``customer_id``, the content columns, ``sequence_num``, ``updated_at``
and ``operation``; their order is README's (oracle.change_key).
"""

from __future__ import annotations

import random
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path

from oracle import change_key, customer_change, expected_daily_revenue, read_lines

CONTENT = ("name", "email", "country", "segment")
FIELDS = (*CONTENT, "sequence_num", "updated_at", "operation")
SCHEMA = (
    "customer_id STRING, name STRING, email STRING, country STRING, segment STRING, "
    "sequence_num BIGINT, updated_at TIMESTAMP, operation STRING"
)
START = datetime(2026, 11, 1)


def history(changes: list[dict], tracked: tuple[str, ...] = CONTENT) -> list[dict]:
    """Every customer's versions, in key then time order; each with the changes it absorbed."""
    by_key: dict[str, dict[tuple, dict]] = defaultdict(dict)
    for change in changes:
        copy = {f: change[f] for f in ("customer_id", *FIELDS)}
        by_key[copy["customer_id"]][tuple(copy.items())] = copy  # copies count once
    rows = []
    for key in sorted(by_key):
        open_row = None
        for change in sorted(by_key[key].values(), key=change_key):
            absorbed = {f: change[f] for f in FIELDS}
            last = {"sequence_num": change["sequence_num"], "operation": change["operation"]}
            if change["operation"] == "DELETE":
                if open_row is None:  # nothing open: a row of its own, closed as it opens
                    rows.append(
                        {"customer_id": key, **dict.fromkeys(CONTENT), **last}
                        | _interval(change["updated_at"], change["updated_at"], [absorbed])
                    )
                else:
                    open_row.update(last, valid_to=change["updated_at"], is_current=False)
                    open_row["_changes"].append(absorbed)
                    open_row = None
                continue
            content = {c: change[c] for c in CONTENT}
            if open_row is not None and all(open_row[c] == change[c] for c in tracked):
                open_row.update(content, **last)  # untracked columns only: in place
                open_row["_changes"].append(absorbed)
                continue
            if open_row is not None:
                open_row.update(valid_to=change["updated_at"], is_current=False)
            open_row = {"customer_id": key, **content, **last} | _interval(
                change["updated_at"], None, [absorbed]
            )
            rows.append(open_row)
    return rows


def _interval(valid_from: datetime, valid_to: datetime | None, absorbed: list[dict]) -> dict:
    return {
        "valid_from": valid_from,
        "valid_to": valid_to,
        "is_current": valid_to is None,
        "_changes": absorbed,
    }


def landed_changes(landing: Path) -> list[dict]:
    """The valid customer changes of every line landed in ``landing/customers``."""
    folder = landing / "customers"
    lines = read_lines(folder) if folder.exists() else []
    return [change for _, line in lines if (change := customer_change(line)) is not None]


def change_at(changes: list[dict], customer_id: str, at: datetime) -> dict | None:
    """The change in force for ``customer_id`` at ``at``: among its changes with
    ``updated_at`` <= ``at``, the greatest; None when there is none or it is a DELETE."""
    known = [c for c in changes if c["customer_id"] == customer_id and c["updated_at"] <= at]
    if not known:
        return None
    newest = max(known, key=change_key)
    return None if newest["operation"] == "DELETE" else newest


def generated_changes(seed: int, customers: int = 6, count: int = 90) -> list[dict]:
    """Changes with every hard case: ties on the sequence number, a later sequence with an
    earlier time, deletes first, twice, then re-inserts, untracked and unchanged updates, and
    exact copies."""
    rng = random.Random(seed)
    changes = []
    for _ in range(count):
        operation = rng.choices(["INSERT", "UPDATE", "DELETE"], [3, 5, 2])[0]
        deleted = operation == "DELETE" and rng.random() < 0.5
        changes.append(
            {
                "customer_id": f"c{rng.randrange(customers)}",
                "name": None if deleted else rng.choice(["Ada", "Bo"]),
                "email": None if deleted else rng.choice(["a@x", "b@x", None]),
                "country": None if deleted else rng.choice(["DE", "FR", "ES"]),
                "segment": None if deleted else rng.choice(["retail", "smb"]),
                "sequence_num": rng.randrange(1, 12),
                "updated_at": START + timedelta(hours=rng.randrange(0, 200)),
                "operation": operation,
            }
        )
    changes += rng.sample(changes, 10)  # copies
    # The same content again, later: an update in place even when every column is tracked.
    kept = [c for c in changes if c["operation"] != "DELETE"]
    for change in rng.sample(kept, 8):
        later = change["updated_at"] + timedelta(minutes=30)
        changes.append(change | {"sequence_num": change["sequence_num"], "updated_at": later})
    return changes


ORDERS = ("as generated", "reversed", "shuffled")


def arriving(items: list, order: str, seed: int) -> list:
    """``items`` in one of :data:`ORDERS` of arrival."""
    if order == "reversed":
        return items[::-1]
    return random.Random(seed).sample(items, len(items)) if order == "shuffled" else items


def in_batches(items: list, batches: int = 3) -> list[list]:
    """``items`` cut into ``batches`` runs of about the same length, in order."""
    size = -(-len(items) // batches)
    return [items[i : i + size] for i in range(0, len(items), size)]


def _row_order(row: dict) -> tuple:
    return (row["customer_id"], row["valid_from"], row["sequence_num"], repr(row))


def rows_in_order(df) -> list[dict]:
    """A history DataFrame's rows as the oracle's (without the row ids the MERGE matches on)."""
    rows = [r.asDict(recursive=True) for r in df.drop("_version_id").collect()]
    return sorted(rows, key=_row_order)


def expected_in_order(changes: list[dict], tracked: tuple[str, ...] = CONTENT) -> list[dict]:
    return sorted(history(changes, tracked), key=_row_order)


def expected_revenue_at_purchase(silver: dict[str, dict], changes: list[dict]) -> dict[tuple, dict]:
    """``gold/daily_revenue_by_country`` by default: each purchase under the country of the
    change in force for its customer at its ``event_timestamp`` (:func:`change_at`)."""
    by_customer: dict[str, list[dict]] = defaultdict(list)
    for change in changes:
        by_customer[change["customer_id"]].append(change)

    def country_of(purchase: dict) -> str | None:
        user = purchase["user_id"]
        change = change_at(by_customer[user], user, purchase["event_timestamp"])
        return None if change is None else change["country"]

    return expected_daily_revenue(silver, country_of)
