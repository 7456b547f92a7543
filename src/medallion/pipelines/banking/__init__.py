"""Banking transaction monitoring: transactions screened against account profiles, and the
suspicious ones queued as fraud alerts.

Transactions land in ``<landing>/transactions/``, profile changes in ``<landing>/accounts/``
(or those topics). Silver applies the changes by a sequence-aware MERGE, and keeps each
transaction once, screened by the alert rules of transforms.py against its account's profile
as known when its batch runs. Gold holds the alert queue and each account's daily activity.
"""

from __future__ import annotations

from medallion.config import Config
from medallion.declarations import APPEND_ONLY, Flow, Pipeline, Table
from medallion.json_columns import MONEY_SUM_TYPE
from medallion.pipelines import register
from medallion.pipelines.banking.contract import (
    ACCOUNT_CHANGES,
    FREE_TEXT_FIELDS,
    PROFILE_FIELDS,
    TRANSACTIONS,
)
from medallion.pipelines.banking.generator import generate
from medallion.pipelines.banking.transforms import THRESHOLDS, AlertRules, screen
from medallion.pipelines.banking.views import VIEWS
from medallion.pipelines.blocks import (
    CHANGE_FEED,
    AppendWhere,
    ApplyChanges,
    Dataset,
    IncrementalAggregate,
    Measure,
    MeasureWhere,
    ValidatedDataset,
)
from medallion.streams.apply_history import KeptHistory
from medallion.subjects import Subjects
from medallion.tables import read_table
from medallion.transforms.change_records import FULL_ROW_SEQUENCE, ChangeRecords
from medallion.transforms.history import history_schema

# A profile's content, in silver/accounts and its history.
PROFILE = (
    "risk_score DOUBLE, opened_at TIMESTAMP, avg_transaction_amount DECIMAL(18,4), country STRING"
)
ACCOUNTS = ChangeRecords("account_id", (*PROFILE_FIELDS, "country"))
# Bronze and the quarantine of each dataset, and the bronze flows.
ACCOUNTS_IN = Dataset(ACCOUNT_CHANGES, ("account_id",))
# The current profile of each account (deleted accounts have no row).
SILVER_ACCOUNTS = Table(
    "silver",
    "accounts",
    f"account_id STRING NOT NULL, {PROFILE}, sequence_num BIGINT NOT NULL, updated_at TIMESTAMP, "
    "operation STRING, _ingested_at TIMESTAMP, _source_file STRING",
    CHANGE_FEED,
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
# Every version of every account profile (SCD type 2, transforms/history.py). The screen of a
# transaction reads silver/accounts as it is when the transaction is screened: an alert is
# about what was known then (docs/banking.md).
ACCOUNTS_HISTORY = Table(
    "silver",
    "accounts_history",
    history_schema("account_id STRING", PROFILE),
    CHANGE_FEED,
    zorder=("account_id",),
    history=True,
)
KEPT_HISTORY = KeptHistory(
    ACCOUNTS_HISTORY.key, ACCOUNTS_IN.bronze.key, "track_account_history_columns", ACCOUNTS
)
# Profile changes applied by a sequence-aware MERGE, deletes included, every version kept in
# silver/accounts_history; its replay comes before the transactions' (screened against it).
accounts_batch = ApplyChanges(
    ("account_id",),
    FULL_ROW_SEQUENCE,
    apply_as_deletes="operation = 'DELETE'",
    contract=ACCOUNT_CHANGES,
    quarantine=ACCOUNTS_IN.quarantine,
    validate=ACCOUNTS_IN.validate,
    tombstones_table=ACCOUNT_TOMBSTONES,
    history=KEPT_HISTORY,
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


def _screening(config: Config):
    """Each new transaction screened against the account profiles as they are when its batch
    runs, by the alert rules the run's settings give."""
    accounts, rules = config.table(SILVER_ACCOUNTS.key), AlertRules.from_config(config)
    return lambda spark, unseen: screen(unseen, read_table(spark, accounts), rules)


# Refused transactions to the quarantine; valid ones (the transaction's own columns, silver's
# first seven) to silver once per transaction_id across all history, screened.
TRANSACTIONS_IN = ValidatedDataset(
    TRANSACTIONS,
    ("transaction_id",),
    FREE_TEXT_FIELDS,
    silver=SILVER_TRANSACTIONS,
    columns=SILVER_TRANSACTIONS.columns[:7],
    enrich=_screening,
    joins=(SILVER_ACCOUNTS,),
)

# The analysts' alert queue: each suspicious transaction once (silver only appends).
ALERT_QUEUE = AppendWhere("is_suspicious")
FRAUD_ALERTS = Table(
    "gold",
    "fraud_alerts",
    "transaction_id STRING NOT NULL, account_id STRING NOT NULL, amount DECIMAL(18,4) NOT NULL, "
    "transaction_timestamp TIMESTAMP NOT NULL, alert_reasons ARRAY<STRING> NOT NULL",
    APPEND_ONLY,
    zorder=("transaction_timestamp",),
)
# Each account's activity per UTC day, however old the day: silver only appends, so each
# transaction is added once.
ACCOUNT_DAILY_ACTIVITY = Table(
    "gold",
    "account_daily_activity",
    "account_id STRING NOT NULL, event_date DATE NOT NULL, transactions BIGINT NOT NULL, "
    "amount DECIMAL(28,4) NOT NULL, flagged_transactions BIGINT NOT NULL, "
    "flagged_amount DECIMAL(28,4) NOT NULL, max_amount DECIMAL(18,4) NOT NULL",
    zorder=("event_date", "account_id"),
)
DAILY_ACTIVITY = IncrementalAggregate(
    ("account_id", "event_date"),
    (
        Measure("transactions", "count"),
        Measure("amount", "sum", "amount", MONEY_SUM_TYPE),
        MeasureWhere("flagged_transactions", "count", where="is_suspicious"),
        MeasureWhere("flagged_amount", "sum", "amount", MONEY_SUM_TYPE, where="is_suspicious"),
        Measure("max_amount", "max", "amount"),
    ),
)

BANKING = register(
    Pipeline(
        "banking",
        (
            TRANSACTIONS_IN.bronze,
            ACCOUNTS_IN.bronze,
            SILVER_ACCOUNTS,
            ACCOUNT_TOMBSTONES,
            ACCOUNTS_HISTORY,
            ACCOUNTS_IN.quarantine,
            SILVER_TRANSACTIONS,
            TRANSACTIONS_IN.quarantine,
            FRAUD_ALERTS,
            ACCOUNT_DAILY_ACTIVITY,
        ),
        (
            TRANSACTIONS_IN.bronze_flow,
            ACCOUNTS_IN.bronze_flow,
            ACCOUNTS_IN.silver_flow(
                (SILVER_ACCOUNTS, ACCOUNT_TOMBSTONES, ACCOUNTS_IN.quarantine, ACCOUNTS_HISTORY),
                accounts_batch,
            ),
            TRANSACTIONS_IN.append_flow,
            Flow("gold_fraud_alerts", "gold", SILVER_TRANSACTIONS, (FRAUD_ALERTS,), ALERT_QUEUE),
            Flow(
                "gold_account_daily_activity",
                "gold",
                SILVER_TRANSACTIONS,
                (ACCOUNT_DAILY_ACTIVITY,),
                batch=DAILY_ACTIVITY,
            ),
        ),
        generate=generate,
        settings=(*THRESHOLDS, KEPT_HISTORY.setting()),
        title="Fraud alerts",
        views=VIEWS,
        contracts=(TRANSACTIONS, ACCOUNT_CHANGES),
        # An account is the data subject: every banking table carries its account_id, so an
        # erasure deletes rows and recomputes nothing.
        subjects=Subjects(
            {TRANSACTIONS.dataset: "account_id", ACCOUNT_CHANGES.dataset: "account_id"}
        ),
    )
)
