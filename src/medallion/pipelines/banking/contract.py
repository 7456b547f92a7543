"""What a transaction and an account profile change are: their fields, and why one is refused.

A transaction's ``amount`` is money > 0 (exact, DECIMAL(18,4)) and its ``currency`` a
three-letter upper-case code; ``merchant`` and ``channel`` are free text, kept as text whatever
they hold. An account profile change is a full row image: its ``risk_score`` (0 to 1),
``opened_at`` and ``avg_transaction_amount`` are required unless it is a DELETE. Anything else
goes to its quarantine with a reason naming every rule it breaks.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from medallion.contract_rules import Contract
from medallion.contracts import OPERATIONS, Check, FieldRule, field_missing, field_text, field_value
from medallion.pipelines.blocks.datasets import pattern_check, range_check
from medallion.pipelines.blocks.tables import validator

CURRENCY_PATTERN = r"^[A-Z]{3}\z"
FREE_TEXT_FIELDS = ("merchant", "channel")
# Content that is required unless the change is a DELETE.
PROFILE_FIELDS = ("risk_score", "opened_at", "avg_transaction_amount")


def _amount_positive() -> tuple[Column, str]:
    return F.coalesce(field_value("amount") == 0, F.lit(False)), "amount is not greater than 0"


def _profile_present(name: str) -> Check:
    def build() -> tuple[Column, str]:
        upsert = F.coalesce(field_text("operation").isin("INSERT", "UPDATE"), F.lit(False))
        return upsert & field_missing(name), f"missing field: {name} (required unless DELETE)"

    return Check(f"{name}_present_unless_delete", build)


TRANSACTIONS = Contract(
    "transactions",
    (
        FieldRule("transaction_id", "string", True),
        FieldRule("account_id", "string", True),
        FieldRule("amount", "money", True),
        FieldRule("currency", "string", True),
        FieldRule("transaction_timestamp", "timestamp", True),
    ),
    (
        Check("amount_positive", _amount_positive),
        pattern_check(
            "currency_code", "currency", CURRENCY_PATTERN, "a three-letter upper-case code"
        ),
    ),
)
ACCOUNT_CHANGES = Contract(
    "accounts",
    (
        FieldRule("account_id", "string", True),
        FieldRule("risk_score", "number", False),
        FieldRule("opened_at", "timestamp", False),
        FieldRule("avg_transaction_amount", "money", False),
        FieldRule("country", "string", False),
        FieldRule("operation", "string", True, OPERATIONS, strict=True),
        FieldRule("sequence_num", "integer", True),
        FieldRule("updated_at", "timestamp", True),
    ),
    (*(_profile_present(name) for name in PROFILE_FIELDS), range_check("risk_score", 0, 1)),
)
# Bronze rows plus ``reason`` (NULL when valid), the rules each broke and the typed columns;
# ``expectations`` say which broken rules let one pass.
validate_transactions = validator(TRANSACTIONS, FREE_TEXT_FIELDS)
validate_account_changes = validator(ACCOUNT_CHANGES)
