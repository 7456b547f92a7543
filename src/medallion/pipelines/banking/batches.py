"""The banking pipeline's streams: how each starts, and what each does with a micro-batch.

Every write is tagged with the stream and the batch id (streams/exactly_once.py), so a batch
replayed after a crash writes nothing twice.
"""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from medallion.config import Config
from medallion.declarations import Flow
from medallion.pipelines.banking import tables as t
from medallion.pipelines.banking.contract import (
    ACCOUNT_CHANGES,
    TRANSACTION_COLUMNS,
    TRANSACTIONS,
    validate_account_changes,
    validate_transactions,
)
from medallion.pipelines.banking.transforms import (
    ACCOUNTS,
    ADD_DAILY_ACTIVITY,
    AlertRules,
    daily_activity_increments,
    fraud_alerts,
    screen,
)
from medallion.pipelines.blocks import ValidatedAppend
from medallion.streams.apply_changes import ApplyChanges
from medallion.streams.apply_history import KeptHistory
from medallion.streams.exactly_once import MergingBatches
from medallion.streams.sinks import Trigger, start_append
from medallion.streams.sources import delta_stream
from medallion.tables import read_table

# Every version of every account profile, and the setting that names the columns it tracks.
KEPT_HISTORY = KeptHistory(
    t.ACCOUNTS_HISTORY.key, t.BRONZE_ACCOUNTS.key, "track_account_history_columns"
)

# Account profile changes applied by a sequence-aware MERGE, deletes included, and every
# version of every profile kept in silver/accounts_history (streams/apply_history.py).
accounts_batch = ApplyChanges(
    ACCOUNTS,
    ACCOUNT_CHANGES,
    validate_account_changes,
    t.SILVER_ACCOUNTS,
    t.ACCOUNT_TOMBSTONES,
    t.ACCOUNTS_QUARANTINE,
    KEPT_HISTORY,
)


def _screening(config: Config):
    """Each new transaction screened against the account profiles as they are when its batch
    runs, by the alert rules the run's settings give."""
    accounts, rules = config.table(t.SILVER_ACCOUNTS.key), AlertRules.from_config(config)
    return lambda spark, unseen: screen(unseen, read_table(spark, accounts), rules)


# Refused transactions to the quarantine; valid ones to silver once per transaction_id across
# all history (the first copy to arrive), screened.
transactions_batch = ValidatedAppend(
    TRANSACTIONS,
    validate_transactions,
    t.SILVER_TRANSACTIONS,
    t.TRANSACTIONS_QUARANTINE,
    ("transaction_id",),
    columns=TRANSACTION_COLUMNS,
    enrich=_screening,
)


# Each day's activity of an account: the batch's transactions (new to silver, which only
# appends) added to the day's row, however old the day.
daily_activity_batch = MergingBatches(
    daily_activity_increments, ("account_id", "event_date"), ADD_DAILY_ACTIVITY
)


def start_fraud_alerts(
    spark: SparkSession, config: Config, flow: Flow, trigger: Trigger
) -> StreamingQuery:
    """The suspicious transactions appended to the alert queue: silver holds each transaction
    once and only appends, so each alert is written once."""
    checkpoint = config.checkpoint(flow.name)
    source = delta_stream(
        spark,
        config.table(flow.source.key),
        config.source_options(flow.name),
        checkpoint=checkpoint,
    )
    (alerts,) = flow.outputs
    return start_append(
        fraud_alerts(source), config.table(alerts.key), checkpoint, trigger, flow.name
    )
