"""Banking transaction monitoring: transactions screened against account profiles, and the
suspicious ones queued as fraud alerts.

Transactions land in ``<landing>/transactions/`` and account profile changes in
``<landing>/accounts/`` (or the ``transactions`` and ``accounts`` topics). Silver applies the
profile changes by a sequence-aware MERGE, and keeps each transaction once, screened against
its account's profile as known when its batch runs (a stream-static join) by the alert rules
of transforms.py. Gold holds the alert queue and each account's daily activity.
"""

from __future__ import annotations

from decimal import Decimal
from functools import partial

from medallion.declarations import Flow, Landing, Pipeline, QuarantineReplay
from medallion.pipeline_settings import Setting
from medallion.pipelines import register
from medallion.pipelines.banking import batches
from medallion.pipelines.banking import tables as t
from medallion.pipelines.banking.contract import (
    ACCOUNT_CHANGES,
    ACCOUNT_FIELDS,
    BRONZE_TRANSACTION_FIELDS,
    TRANSACTIONS,
    validate_account_changes,
)
from medallion.pipelines.banking.generator import generate
from medallion.pipelines.banking.transforms import ACCOUNTS
from medallion.pipelines.banking.views import VIEWS
from medallion.streams.sinks import start_bronze_append
from medallion.subjects import Subjects

SETTINGS = (
    Setting(
        "fraud_average_multiple",
        Decimal(5),
        "amount_over_average fires when the amount exceeds this many times the account's "
        "average transaction amount",
    ),
    Setting(
        "fraud_risk_score_above",
        Decimal("0.8"),
        "high_risk_score fires when the account's risk score exceeds this",
    ),
    Setting(
        "fraud_new_account_days",
        Decimal(30),
        "new_account_large_amount applies to accounts younger than this many whole days",
    ),
    Setting(
        "fraud_new_account_amount",
        Decimal(1000),
        "new_account_large_amount fires on a young account when the amount exceeds this",
    ),
    batches.KEPT_HISTORY.setting(ACCOUNTS),
)

BANKING = register(
    Pipeline(
        "banking",
        t.TABLES,
        (
            Flow(
                "bronze_transactions",
                "bronze",
                Landing("transactions"),
                (t.BRONZE_TRANSACTIONS,),
                partial(start_bronze_append, fields=BRONZE_TRANSACTION_FIELDS),
            ),
            Flow(
                "bronze_accounts",
                "bronze",
                Landing("accounts"),
                (t.BRONZE_ACCOUNTS,),
                partial(start_bronze_append, fields=ACCOUNT_FIELDS),
            ),
            Flow(
                "silver_accounts",
                "silver",
                t.BRONZE_ACCOUNTS,
                (
                    t.SILVER_ACCOUNTS,
                    t.ACCOUNT_TOMBSTONES,
                    t.ACCOUNTS_QUARANTINE,
                    t.ACCOUNTS_HISTORY,
                ),
                batch=batches.accounts_batch,
            ),
            Flow(
                "silver_transactions",
                "silver",
                t.BRONZE_TRANSACTIONS,
                (t.SILVER_TRANSACTIONS, t.TRANSACTIONS_QUARANTINE),
                joins=(t.SILVER_ACCOUNTS,),
                batch=batches.transactions_batch,
            ),
            Flow(
                "gold_fraud_alerts",
                "gold",
                t.SILVER_TRANSACTIONS,
                (t.FRAUD_ALERTS,),
                batches.start_fraud_alerts,
            ),
            Flow(
                "gold_account_daily_activity",
                "gold",
                t.SILVER_TRANSACTIONS,
                (t.ACCOUNT_DAILY_ACTIVITY,),
                batch=batches.daily_activity_batch,
            ),
        ),
        generate=generate,
        settings=SETTINGS,
        title="Fraud alerts",
        views=VIEWS,
        contracts=(TRANSACTIONS, ACCOUNT_CHANGES),
        # The profiles' replay; the transactions' comes with their block, after it, so that
        # the transactions promoted are screened against the profiles promoted first.
        replays=(
            QuarantineReplay(
                t.ACCOUNTS_QUARANTINE,
                "silver_accounts",
                ACCOUNT_CHANGES.dataset,
                validate_account_changes,
            ),
        ),
        # An account is the data subject: every banking table carries its account_id, so an
        # erasure deletes rows and recomputes nothing.
        subjects=Subjects(
            {TRANSACTIONS.dataset: "account_id", ACCOUNT_CHANGES.dataset: "account_id"}
        ),
    )
)
