"""Synthetic banking data: account profiles and their changes, and card and online spending
with the fraud patterns each alert rule catches, plus the faults a real feed has."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

from medallion.generate import FaultRates, FaultyFeed, faulty_line, write_in_files

TRANSACTIONS, ACCOUNTS = "transactions", "accounts"
_START = datetime(2026, 11, 20, 8, tzinfo=timezone.utc)
_COUNTRIES = ("DE", "FR", "NL", "GB", "US", "ES")
_CURRENCIES = ("EUR", "EUR", "EUR", "USD", "GBP")
_CHANNELS = ("card", "online", "atm", "transfer")
_MERCHANTS = ("grocer", "fuel", "airline", "electronics", "pharmacy", "cafe", "bookshop")


def _iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def _profile(rng: random.Random, index: int, number: int, start: datetime) -> dict:
    # One account in 12 was opened in the last three weeks (the new-account rule applies to
    # it), and one in 15 is high-risk: spread evenly, so that a small batch has both.
    new = index % 12 == 5
    opened = start - timedelta(days=rng.randrange(1, 21) if new else rng.randrange(60, 2000))
    risky = index % 15 == 1
    return {
        "account_id": f"acc-{number:05d}",
        "risk_score": round(rng.uniform(0.81, 0.99) if risky else rng.betavariate(2, 9), 3),
        "opened_at": _iso(opened.replace(microsecond=0)),
        "avg_transaction_amount": round(rng.lognormvariate(4.2, 0.6), 2),
        "country": rng.choice(_COUNTRIES),
    }


def account_change_lines(accounts: int, seed: int, faults: FaultRates) -> tuple[list[str], dict]:
    """Profile changes of ``accounts`` accounts, in arrival order: an INSERT each, then UPDATEs
    (some sent before an older one), DELETEs and invalid or malformed lines. Returns the lines
    and each account's first profile, by id (what the transactions are drawn from)."""
    rng = random.Random(seed * 7 + 1)
    start = _START + timedelta(hours=seed % 97)
    profiles = {}
    changes: list[dict] = []
    for number in range(accounts):
        profile = _profile(rng, number, number + seed * 100_000, start)
        profiles[profile["account_id"]] = profile
        at = start - timedelta(minutes=rng.randrange(60, 600))
        changes.append(dict(profile, operation="INSERT", sequence_num=1, updated_at=_iso(at)))
        updates = rng.choice((0, 0, 1, 2))
        for sequence in range(2, 2 + updates):
            drift = rng.uniform(-0.05, 0.05)
            changed = dict(
                profile, risk_score=round(min(1, max(0, profile["risk_score"] + drift)), 3)
            )
            changed["avg_transaction_amount"] = round(
                profile["avg_transaction_amount"] * rng.uniform(0.7, 1.4), 2
            )
            at += timedelta(minutes=rng.randrange(1, 30))
            changes.append(
                dict(changed, operation="UPDATE", sequence_num=sequence, updated_at=_iso(at))
            )
        if rng.random() < 0.04:
            at += timedelta(minutes=5)
            deleted = {"account_id": profile["account_id"], "operation": "DELETE"}
            changes.append(dict(deleted, sequence_num=2 + updates, updated_at=_iso(at)))
    # Out of order: about one change in ten swaps places with the one before it.
    for i in range(1, len(changes)):
        if rng.random() < 0.1:
            changes[i - 1], changes[i] = changes[i], changes[i - 1]
    return [faulty_line(rng, change, faults, _invalid_change)[0] for change in changes], profiles


def _invalid_change(rng: random.Random, change: dict) -> dict:
    broken = dict(change)
    fault = rng.randrange(4)
    if fault == 0:
        broken["risk_score"] = 1.5
    elif fault == 1:  # an update without the account's opening date
        broken.pop("opened_at", None)
        broken["operation"] = "UPDATE"
    elif fault == 2:
        broken["operation"] = "MERGE"
    else:
        broken["sequence_num"] = str(broken["sequence_num"])
    return broken


def _amount(rng: random.Random, profile: dict | None, start: datetime) -> float:
    average = profile["avg_transaction_amount"] if profile else 60.0
    opened = (
        datetime.fromisoformat(profile["opened_at"].replace("Z", "+00:00")) if profile else None
    )
    # New accounts are where large first payments come from (and what the new-account rule is for).
    large = 0.15 if opened is not None and start - opened < timedelta(days=21) else 0.02
    roll = rng.random()
    if roll < 0.02:  # far above the account's usual spending
        return round(average * rng.uniform(6, 20), 2)
    if roll < 0.02 + large:  # a large amount, which on a new account is suspicious
        return round(rng.uniform(1000.01, 4000), 2)
    return max(0.01, round(average * rng.lognormvariate(0, 0.5), 2))


def _invalid_transaction(rng: random.Random, transaction: dict) -> dict:
    broken = dict(transaction)
    fault = rng.randrange(6)
    if fault == 0:
        broken["amount"] = 0
    elif fault == 1:
        broken["amount"] = -abs(broken["amount"])
    elif fault == 2:
        broken["amount"] = str(broken["amount"])
    elif fault == 3:
        broken["currency"] = broken["currency"].lower()
    elif fault == 4:
        broken["transaction_timestamp"] = broken["transaction_timestamp"].rstrip("Z")
    else:
        del broken["transaction_id"]
    return broken


def transaction_lines(
    records: int, seed: int, faults: FaultRates, profiles: dict[str, dict]
) -> list[str]:
    """``records`` transaction lines in arrival order, on the accounts of ``profiles`` and on
    a few unknown accounts, faults included."""
    rng = random.Random(seed * 7 + 2)
    start = _START + timedelta(hours=seed % 97)
    ids = sorted(profiles)
    feed = FaultyFeed(rng, faults)
    for n in range(records):
        at = start + timedelta(seconds=n * 7 + rng.randrange(7), milliseconds=rng.randrange(1000))
        at = feed.arrival(at)
        unknown = not ids or rng.random() < 0.02
        account = f"acc-x{rng.randrange(1000):04d}" if unknown else rng.choice(ids)
        transaction = {
            "transaction_id": f"tx-{seed}-{n:07d}",
            "account_id": account,
            "amount": _amount(rng, profiles.get(account), start),
            "currency": rng.choice(_CURRENCIES),
            "merchant": rng.choice(_MERCHANTS),
            "channel": rng.choice(_CHANNELS),
            "transaction_timestamp": _iso(at),
        }
        feed.add(transaction, _invalid_transaction)
    return feed.lines


def generate(
    landing: str,
    records: int = 1000,
    files: int = 4,
    seed: int = 42,
    faults: FaultRates | None = None,
    accounts: int | None = None,
    transactions: int | None = None,
    **_other_sizes: int,
) -> dict[str, list[str]]:
    """Write ``transactions`` transactions (default ``records``) to ``landing/transactions/``
    and the profile changes of ``accounts`` accounts (default: one per 20 transactions, at
    least 20) to ``landing/accounts/``, each in files landed in name order. Returns the paths
    written."""
    faults = faults or FaultRates()
    records = records if transactions is None else transactions
    count = accounts if accounts is not None else max(20, records // 20)
    changes, profiles = account_change_lines(count, seed, faults)
    return {
        ACCOUNTS: write_in_files(landing, ACCOUNTS, f"accounts-{seed}", changes, min(files, 2)),
        TRANSACTIONS: write_in_files(
            landing,
            TRANSACTIONS,
            f"transactions-{seed}",
            transaction_lines(records, seed, faults, profiles),
            files,
        ),
    }
