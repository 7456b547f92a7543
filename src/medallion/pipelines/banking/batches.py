"""The banking pipeline's streams: how each starts, and what each does with a micro-batch.

Every write is tagged with the stream and the batch id (streams/exactly_once.py), so a batch
replayed after a crash writes nothing twice.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from medallion.config import Config
from medallion.declarations import Flow
from medallion.faults import pause_point
from medallion.pipelines.banking import tables as t
from medallion.pipelines.banking.contract import (
    ACCOUNT_CHANGES,
    TRANSACTIONS,
    validate_account_changes,
    validate_transactions,
)
from medallion.pipelines.banking.transforms import (
    ACCOUNTS,
    ADD_DAILY_ACTIVITY,
    AlertRules,
    daily_activity_increments,
    first_arrivals,
    fraud_alerts,
    quarantined_transactions,
    screen,
)
from medallion.streams.apply_changes import apply_changes_batches
from medallion.streams.apply_history import KeptHistory
from medallion.streams.exactly_once import ReplayGuard, merging_batches
from medallion.streams.known_keys import HASH_COLUMNS, KnownKeys, kept_keys
from medallion.streams.quality import QualityGate
from medallion.streams.sinks import Trigger, start_append, transaction_app_id
from medallion.streams.sources import delta_stream
from medallion.tables import read_table

Batch = Callable[[DataFrame, int], None]


# Every version of every account profile, and the setting that names the columns it tracks.
KEPT_HISTORY = KeptHistory(
    t.ACCOUNTS_HISTORY.key, t.BRONZE_ACCOUNTS.key, "track_account_history_columns"
)

# Account profile changes applied by a sequence-aware MERGE, deletes included, and every
# version of every profile kept in silver/accounts_history (streams/apply_history.py).
accounts_batch = apply_changes_batches(
    "silver_accounts",
    ACCOUNTS,
    ACCOUNT_CHANGES,
    validate_account_changes,
    t.SILVER_ACCOUNTS.key,
    t.ACCOUNT_TOMBSTONES.key,
    t.ACCOUNTS_QUARANTINE.key,
    KEPT_HISTORY,
)


def transactions_batch(config: Config, checkpoint: str, stream: str | None = None) -> Batch:
    """Refused transactions to the quarantine; valid ones to silver once per transaction_id
    across all history (the first copy to arrive, looked up in the stream's key index),
    screened against the account profiles as they are when the batch runs. ``stream`` names
    another writer than ``silver_transactions`` (a quarantine replay)."""
    stream = stream or "silver_transactions"
    silver = config.table(t.SILVER_TRANSACTIONS.key)
    quarantine = config.table(t.TRANSACTIONS_QUARANTINE.key)
    accounts = config.table(t.SILVER_ACCOUNTS.key)
    app_id = transaction_app_id(stream, checkpoint)
    known = KnownKeys(silver, ("transaction_id",), kept_keys(checkpoint, silver))
    rules = AlertRules.from_config(config)
    guard = ReplayGuard(checkpoint)
    gate = QualityGate(config, stream, TRANSACTIONS, t.SILVER_TRANSACTIONS.key)

    def process(batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        validated = validate_transactions(batch, gate.expectations).persist()
        firsts = first_arrivals(validated).persist()
        try:
            quality, (invalid,) = gate.measure(validated, F.count_if(F.col("reason").isNotNull()))
            gate.check(validated, quality)  # a rule set to fail stops the batch here
            with guard.batch(spark, batch_id) as writes:
                app = app_id(spark)

                def write() -> None:
                    if invalid:
                        writes.append(quarantined_transactions(validated), quarantine, app)
                    pause_point("silver_transactions:quarantined")  # crash tests only
                    unseen, hashes = known.new_rows(spark, firsts)
                    if len(hashes[0]):
                        accounts_now = read_table(spark, accounts)
                        screened = screen(unseen.drop(*HASH_COLUMNS), accounts_now, rules)
                        writes.append(screened, silver, app)
                        known.added(spark, hashes, writes.tag(app))

                gate.record_beside(writes, quality, app, write)
        finally:
            firsts.unpersist()
            validated.unpersist()

    return process


# Each day's activity of an account: the batch's transactions (new to silver, which only
# appends) added to the day's row, however old the day.
daily_activity_batch = merging_batches(
    "gold_account_daily_activity",
    t.ACCOUNT_DAILY_ACTIVITY.key,
    daily_activity_increments,
    ["account_id", "event_date"],
    ADD_DAILY_ACTIVITY,
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
