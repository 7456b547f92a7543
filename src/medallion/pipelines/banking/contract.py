"""What a transaction and an account profile change are: their fields, and why one is refused.

A transaction is valid when ``transaction_id`` and ``account_id`` are non-empty strings,
``amount`` is a JSON number > 0 that fits DECIMAL(18,4) (money is exact), ``currency`` is a
three-letter upper-case code and ``transaction_timestamp`` is ISO-8601 with a zone.
``merchant`` and ``channel`` are free text: whatever they hold is kept as text.

An account profile change is a full row image: ``account_id`` (a non-empty string),
``operation`` (INSERT, UPDATE or DELETE), ``sequence_num`` (an integer) and ``updated_at`` (a
timestamp) always; ``risk_score`` (a number from 0 to 1), ``opened_at`` (a timestamp) and
``avg_transaction_amount`` (money >= 0) are required unless the change is a DELETE, and
``country`` is an optional string. Anything else goes to its quarantine with a reason naming
every rule it breaks.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from medallion.column_stages import built_once
from medallion.contract_rules import Contract
from medallion.contracts import (
    OPERATIONS,
    Check,
    FieldRule,
    Stages,
    apply_validation,
    field_missing,
    field_text,
    field_value,
)
from medallion.expectations import Expectations
from medallion.json_columns import as_string, json_field
from medallion.transforms.bronze import METADATA_COLUMNS, kafka_position_columns

CURRENCY_PATTERN = r"^[A-Z]{3}\z"
TRANSACTION_FIELDS = (
    FieldRule("transaction_id", "string", True),
    FieldRule("account_id", "string", True),
    FieldRule("amount", "money", True),
    FieldRule("currency", "string", True),
    FieldRule("transaction_timestamp", "timestamp", True),
)
FREE_TEXT_FIELDS = ("merchant", "channel")
# What bronze keeps as columns (every field, as the JSON value's text).
BRONZE_TRANSACTION_FIELDS = (
    *TRANSACTION_FIELDS,
    *(FieldRule(name, "string", False) for name in FREE_TEXT_FIELDS),
)
TRANSACTION_COLUMNS = (
    "transaction_id",
    "account_id",
    "amount",
    "currency",
    "merchant",
    "channel",
    "transaction_timestamp",
)

# Content that is required unless the change is a DELETE.
PROFILE_FIELDS = ("risk_score", "opened_at", "avg_transaction_amount")
ACCOUNT_FIELDS = (
    FieldRule("account_id", "string", True),
    FieldRule("risk_score", "number", False),
    FieldRule("opened_at", "timestamp", False),
    FieldRule("avg_transaction_amount", "money", False),
    FieldRule("country", "string", False),
    FieldRule("operation", "string", True, OPERATIONS, strict=True),
    FieldRule("sequence_num", "integer", True),
    FieldRule("updated_at", "timestamp", True),
)


def _typed_columns(fields: tuple[FieldRule, ...]) -> list[Column]:
    return [
        (field_text(f.name) if f.kind == "string" else field_value(f.name)).alias(f.name)
        for f in fields
    ]


def _metadata(kafka_positions: tuple[str, ...]) -> list[Column]:
    return [F.col(name) for name in (*METADATA_COLUMNS, *kafka_positions)]


def _amount_positive() -> tuple[Column, str]:
    return F.coalesce(field_value("amount") == 0, F.lit(False)), "amount is not greater than 0"


def _currency_code() -> tuple[Column, Column]:
    currency = field_text("currency")
    return (
        F.coalesce(
            ~currency.rlike(CURRENCY_PATTERN) & (F.length(F.trim(currency)) > 0), F.lit(False)
        ),
        F.concat(
            F.lit("currency is not a three-letter upper-case code: "), F.substring(currency, 1, 64)
        ),
    )


def _profile_present(name: str) -> Check:
    def build() -> tuple[Column, str]:
        upsert = F.coalesce(field_text("operation").isin("INSERT", "UPDATE"), F.lit(False))
        return upsert & field_missing(name), f"missing field: {name} (required unless DELETE)"

    return Check(f"{name}_present_unless_delete", build)


def _risk_score_in_range() -> tuple[Column, Column]:
    risk = field_value("risk_score")
    return (
        F.coalesce((risk < 0) | (risk > 1), F.lit(False)),
        F.concat(F.lit("risk_score is outside 0..1: "), field_text("risk_score")),
    )


TRANSACTIONS = Contract(
    "transactions",
    TRANSACTION_FIELDS,
    (Check("amount_positive", _amount_positive), Check("currency_code", _currency_code)),
)
ACCOUNT_CHANGES = Contract(
    "accounts",
    ACCOUNT_FIELDS,
    (
        *(_profile_present(name) for name in PROFILE_FIELDS),
        Check("risk_score_in_range", _risk_score_in_range),
    ),
)


def validate_transactions(bronze: DataFrame, expectations: Expectations | None = None) -> DataFrame:
    """Bronze transactions plus ``reason`` (NULL when valid), the rules each broke and the
    typed transaction columns; ``expectations`` say which broken rules let one pass."""
    kafka_positions = tuple(kafka_position_columns(bronze))
    expectations = expectations or Expectations(TRANSACTIONS.dataset)
    return apply_validation(bronze, _transaction_validation(kafka_positions, expectations))


@built_once
def _transaction_validation(kafka_positions: tuple[str, ...], expectations: Expectations) -> Stages:
    doc = F.col("_doc")
    return TRANSACTIONS.validation_stages(
        expectations,
        [
            *_typed_columns(TRANSACTION_FIELDS),
            *[as_string(json_field(doc, name)).alias(name) for name in FREE_TEXT_FIELDS],
            *_metadata(kafka_positions),
        ],
    )


def validate_account_changes(
    bronze: DataFrame, expectations: Expectations | None = None
) -> DataFrame:
    """Bronze account changes plus ``reason`` (NULL when valid), the rules each broke and the
    typed change columns; ``expectations`` say which broken rules let one pass."""
    kafka_positions = tuple(kafka_position_columns(bronze))
    expectations = expectations or Expectations(ACCOUNT_CHANGES.dataset)
    return apply_validation(bronze, _account_validation(kafka_positions, expectations))


@built_once
def _account_validation(kafka_positions: tuple[str, ...], expectations: Expectations) -> Stages:
    return ACCOUNT_CHANGES.validation_stages(
        expectations,
        [
            *_typed_columns(ACCOUNT_FIELDS),
            *_metadata(kafka_positions),
        ],
    )
