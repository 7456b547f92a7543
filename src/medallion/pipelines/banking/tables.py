"""The banking tables: transactions screened against account profiles, bronze to gold."""

from __future__ import annotations

from medallion.declarations import (
    APPEND_ONLY,
    INGEST_METADATA,
    KAFKA_METADATA,
    STREAMING_TABLE_PROPERTIES,
    Table,
)
from medallion.transforms.history import history_schema

_QUARANTINE = "reason STRING NOT NULL, _raw STRING, _source_file STRING, _ingested_at TIMESTAMP"
_ACCOUNT_STATE = (
    "account_id STRING NOT NULL, risk_score DOUBLE, opened_at TIMESTAMP, "
    "avg_transaction_amount DECIMAL(18,4), country STRING, sequence_num BIGINT NOT NULL, "
    "updated_at TIMESTAMP, operation STRING, _ingested_at TIMESTAMP, _source_file STRING"
)

BRONZE_TRANSACTIONS = Table(
    "bronze",
    "transactions",
    "transaction_id STRING, account_id STRING, amount STRING, currency STRING, "
    "transaction_timestamp STRING, merchant STRING, channel STRING, "
    f"{INGEST_METADATA}, {KAFKA_METADATA}",
    APPEND_ONLY,
)
BRONZE_ACCOUNTS = Table(
    "bronze",
    "accounts",
    "account_id STRING, risk_score STRING, opened_at STRING, avg_transaction_amount STRING, "
    "country STRING, operation STRING, sequence_num STRING, updated_at STRING, "
    f"{INGEST_METADATA}, {KAFKA_METADATA}",
    APPEND_ONLY,
)
# The current profile of each account (deleted accounts have no row).
SILVER_ACCOUNTS = Table(
    "silver",
    "accounts",
    _ACCOUNT_STATE,
    {**STREAMING_TABLE_PROPERTIES, "delta.enableChangeDataFeed": "true"},
    zorder=("account_id",),
)
# Each deleted account's newest DELETE, so that an older change cannot bring it back.
ACCOUNT_TOMBSTONES = Table(
    "silver",
    "account_tombstones",
    "account_id STRING NOT NULL, sequence_num BIGINT NOT NULL, updated_at TIMESTAMP, "
    "_ingested_at TIMESTAMP",
    zorder=("account_id",),
)
ACCOUNTS_QUARANTINE = Table(
    "silver",
    "accounts_quarantine",
    f"account_id STRING, {_QUARANTINE}",
    quarantine=True,
)
# One row per transaction_id (the first copy to arrive), screened by the alert rules.
SILVER_TRANSACTIONS = Table(
    "silver",
    "transactions",
    "transaction_id STRING NOT NULL, account_id STRING NOT NULL, amount DECIMAL(18,4) NOT NULL, "
    "currency STRING NOT NULL, merchant STRING, channel STRING, "
    "transaction_timestamp TIMESTAMP NOT NULL, event_date DATE NOT NULL, risk_score DOUBLE, "
    "is_suspicious BOOLEAN NOT NULL, alert_reasons ARRAY<STRING> NOT NULL",
    APPEND_ONLY,
    zorder=("account_id", "transaction_timestamp"),
)
TRANSACTIONS_QUARANTINE = Table(
    "silver",
    "transactions_quarantine",
    f"transaction_id STRING, {_QUARANTINE}",
    quarantine=True,
)
# The analysts' alert queue: each suspicious transaction once.
FRAUD_ALERTS = Table(
    "gold",
    "fraud_alerts",
    "transaction_id STRING NOT NULL, account_id STRING NOT NULL, amount DECIMAL(18,4) NOT NULL, "
    "transaction_timestamp TIMESTAMP NOT NULL, alert_reasons ARRAY<STRING> NOT NULL",
    APPEND_ONLY,
    zorder=("transaction_timestamp",),
)
ACCOUNT_DAILY_ACTIVITY = Table(
    "gold",
    "account_daily_activity",
    "account_id STRING NOT NULL, event_date DATE NOT NULL, transactions BIGINT NOT NULL, "
    "amount DECIMAL(28,4) NOT NULL, flagged_transactions BIGINT NOT NULL, "
    "flagged_amount DECIMAL(28,4) NOT NULL, max_amount DECIMAL(18,4) NOT NULL",
    zorder=("event_date", "account_id"),
)

# Every version of every account profile (SCD type 2, transforms/history.py). The screen of a
# transaction reads silver/accounts as it is when the transaction is screened: an alert is
# about what was known then (docs/banking.md).
ACCOUNTS_HISTORY = Table(
    "silver",
    "accounts_history",
    history_schema(
        "account_id STRING",
        "risk_score DOUBLE, opened_at TIMESTAMP, avg_transaction_amount DECIMAL(18,4), "
        "country STRING",
    ),
    {**STREAMING_TABLE_PROPERTIES, "delta.enableChangeDataFeed": "true"},
    zorder=("account_id",),
    history=True,
)

TABLES = (
    BRONZE_TRANSACTIONS,
    BRONZE_ACCOUNTS,
    SILVER_ACCOUNTS,
    ACCOUNT_TOMBSTONES,
    ACCOUNTS_HISTORY,
    ACCOUNTS_QUARANTINE,
    SILVER_TRANSACTIONS,
    TRANSACTIONS_QUARANTINE,
    FRAUD_ALERTS,
    ACCOUNT_DAILY_ACTIVITY,
)
