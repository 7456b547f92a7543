"""The banking pipeline computed in plain Python from the landed lines: what silver and gold
must hold. Independent of Spark: it parses and validates each line by the contract itself,
applies the account changes and screens each transaction by the documented rules."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from oracle import BLANK, missing_first, plausible_timestamp, read_lines, strict_object

OPERATIONS = ("INSERT", "UPDATE", "DELETE")
OPERATION_RANK = {"INSERT": 1, "UPDATE": 2, "DELETE": 3}
CURRENCY = re.compile(r"[A-Z]{3}")
PROFILE_FIELDS = ("risk_score", "opened_at", "avg_transaction_amount")


@dataclass(frozen=True)
class Rules:
    average_multiple: Decimal = Decimal(5)
    risk_score_above: float = 0.8
    new_account_days: int = 30
    new_account_amount: Decimal = Decimal(1000)


def _text(value: object) -> bool:
    return isinstance(value, str) and not BLANK.fullmatch(value)


def _money(value: object) -> Decimal | None:
    """A JSON number as exact DECIMAL(18,4) money (>= 0), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, Decimal)):
        return None
    exact = Decimal(value)
    if not exact.is_finite() or exact < 0:
        return None
    if exact.normalize().as_tuple().exponent < -4 and exact != 0 or abs(exact) >= Decimal(10) ** 14:
        return None
    return exact


def _timestamp(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    ts = plausible_timestamp(value)
    return None if ts is None else ts.replace(tzinfo=None)


def transaction(line: str, any_currency: bool = False) -> dict | None:
    """The typed transaction when the line is a valid one, else None; with ``any_currency``,
    any non-empty currency passes (``currency_code`` set to warn)."""
    doc = strict_object(line)
    if doc is None:
        return None
    amount, at = _money(doc.get("amount")), _timestamp(doc.get("transaction_timestamp"))
    currency = doc.get("currency")
    if not _text(doc.get("transaction_id")) or not _text(doc.get("account_id")):
        return None
    if amount is None or amount <= 0 or at is None:
        return None
    if not _text(currency) or not (any_currency or CURRENCY.fullmatch(currency)):
        return None
    return {
        "transaction_id": doc["transaction_id"],
        "account_id": doc["account_id"],
        "amount": amount,
        "currency": currency,
        "merchant": doc.get("merchant"),
        "channel": doc.get("channel"),
        "transaction_timestamp": at,
    }


def account_change(line: str, any_risk: bool = False) -> dict | None:
    """The typed account change when the line is a valid one, else None; with ``any_risk``, a
    risk score outside 0 to 1 passes (``risk_score_in_range`` set to warn)."""
    doc = strict_object(line)
    if doc is None:
        return None
    operation, sequence = doc.get("operation"), doc.get("sequence_num")
    if not _text(doc.get("account_id")) or operation not in OPERATIONS:
        return None
    if (
        isinstance(sequence, bool)
        or not isinstance(sequence, int)
        or not -(2**63) <= sequence < 2**63
    ):
        return None
    updated_at = _timestamp(doc.get("updated_at"))
    if updated_at is None:
        return None
    if operation != "DELETE" and any(doc.get(name) is None for name in PROFILE_FIELDS):
        return None
    risk = doc.get("risk_score")
    if risk is not None:
        if isinstance(risk, bool) or not isinstance(risk, (int, Decimal, float)):
            return None
        risk = float(risk)
        if not math.isfinite(risk) or not (any_risk or 0 <= risk <= 1):
            return None
    opened = doc.get("opened_at")
    if opened is not None and (opened := _timestamp(opened)) is None:
        return None
    average = doc.get("avg_transaction_amount")
    if average is not None and (average := _money(average)) is None:
        return None
    country = doc.get("country")
    if country is not None and not isinstance(country, str):
        return None
    return {
        "account_id": doc["account_id"],
        "risk_score": risk,
        "opened_at": opened,
        "avg_transaction_amount": average,
        "country": country,
        "operation": operation,
        "sequence_num": sequence,
        "updated_at": updated_at,
    }


def change_key(change: dict) -> tuple:
    """The documented order of one account's changes: sequence, operation, time, content."""
    content = (
        missing_first(change[name])
        for name in ("risk_score", "opened_at", "avg_transaction_amount", "country")
    )
    return (
        change["sequence_num"],
        OPERATION_RANK[change["operation"]],
        change["updated_at"],
        *content,
    )


def alert_reasons(tx: dict, profile: dict | None, rules: Rules) -> list[str]:
    if profile is None:
        return ["unknown_account"]
    reasons = []
    amount = tx["amount"]
    average, risk = profile["avg_transaction_amount"], profile["risk_score"]
    opened = profile["opened_at"]
    if average is not None and amount > rules.average_multiple * average:
        reasons.append("amount_over_average")
    if risk is not None and risk > rules.risk_score_above:
        reasons.append("high_risk_score")
    young = opened is not None and tx["transaction_timestamp"] - opened < timedelta(
        days=rules.new_account_days
    )
    if young and amount > rules.new_account_amount:
        reasons.append("new_account_large_amount")
    return reasons


@dataclass
class Banking:
    """The banking lake as it must be after each run: :meth:`run` takes the lines a run reads
    (each dataset's in arrival order)."""

    rules: Rules = field(default_factory=Rules)
    newest: dict[str, dict] = field(default_factory=dict)
    tombstones: dict[str, tuple[int, datetime]] = field(default_factory=dict)
    transactions: dict[str, dict] = field(default_factory=dict)
    quarantined_transactions: int = 0
    quarantined_accounts: int = 0
    any_currency: bool = False
    any_risk: bool = False

    @property
    def accounts(self) -> dict[str, dict]:
        """The live profiles: each account's newest change, unless it is a DELETE."""
        return {k: c for k, c in self.newest.items() if c["operation"] != "DELETE"}

    def run(self, account_lines: list[str], transaction_lines: list[str]) -> None:
        for line in account_lines:
            change = account_change(line, self.any_risk)
            if change is None:
                self.quarantined_accounts += 1
                continue
            key = change["account_id"]
            if change["operation"] == "DELETE":
                deleted = (change["sequence_num"], change["updated_at"])
                self.tombstones[key] = max(self.tombstones.get(key, deleted), deleted)
            if key not in self.newest or change_key(change) > change_key(self.newest[key]):
                self.newest[key] = change
        accounts = self.accounts
        for line in transaction_lines:
            tx = transaction(line, self.any_currency)
            if tx is None:
                self.quarantined_transactions += 1
                continue
            if tx["transaction_id"] in self.transactions:
                continue
            profile = accounts.get(tx["account_id"])
            reasons = alert_reasons(tx, profile, self.rules)
            self.transactions[tx["transaction_id"]] = dict(
                tx,
                event_date=tx["transaction_timestamp"].date(),
                risk_score=None if profile is None else profile["risk_score"],
                is_suspicious=bool(reasons),
                alert_reasons=reasons,
            )

    def alerts(self) -> dict[str, tuple]:
        return {
            k: (t["account_id"], t["amount"], t["transaction_timestamp"], t["alert_reasons"])
            for k, t in self.transactions.items()
            if t["is_suspicious"]
        }

    def daily_activity(self) -> dict[tuple[str, date], tuple]:
        days: dict[tuple[str, date], list] = {}
        for t in self.transactions.values():
            row = days.setdefault(
                (t["account_id"], t["event_date"]), [0, Decimal(0), 0, Decimal(0), None]
            )
            row[0] += 1
            row[1] += t["amount"]
            row[2] += t["is_suspicious"]
            row[3] += t["amount"] if t["is_suspicious"] else 0
            row[4] = t["amount"] if row[4] is None else max(row[4], t["amount"])
        return {k: tuple(v) for k, v in days.items()}


class Deliveries:
    """The oracle fed with the lines each run reads: the files landed since the last run."""

    def __init__(self, landing: Path, rules: Rules | None = None) -> None:
        self.landing, self.seen = landing, set()
        self.oracle = Banking(rules or Rules())

    def _new_lines(self, dataset: str) -> list[str]:
        folder = self.landing / dataset
        lines = [(f, line) for f, line in read_lines(folder)] if folder.exists() else []
        new = [line for f, line in lines if f not in self.seen]
        self.seen |= {f for f, _ in lines}
        return new

    def ran(self) -> Banking:
        self.oracle.run(self._new_lines("accounts"), self._new_lines("transactions"))
        return self.oracle
