"""The banking pipeline's streams: how each starts, and what each does with a micro-batch.

Every write is tagged with the stream and the batch id (streams/exactly_once.py), so a batch
replayed after a crash writes nothing twice.
"""

from __future__ import annotations

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
from medallion.streams.apply_changes import ApplyChanges
from medallion.streams.apply_history import KeptHistory
from medallion.streams.exactly_once import BatchWrites, MergingBatches, ReplayGuard
from medallion.streams.known_keys import KnownKeys, kept_keys
from medallion.streams.quality import QualityGate
from medallion.streams.sinks import Trigger, start_append, transaction_app_id
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


class TransactionsBatch:
    """The ``foreachBatch`` function of ``silver_transactions``, or of ``stream`` (a quarantine
    replay): refused transactions to the quarantine; valid ones to silver once per
    transaction_id across all history (the first copy to arrive, looked up in the stream's key
    index), screened against the account profiles as they are when the batch runs."""

    def __init__(
        self, config: Config, flow: Flow, checkpoint: str, stream: str | None = None
    ) -> None:
        stream = stream or flow.name
        self.silver = config.table(t.SILVER_TRANSACTIONS.key)
        self.quarantine = config.table(t.TRANSACTIONS_QUARANTINE.key)
        self.accounts = config.table(t.SILVER_ACCOUNTS.key)
        self.app_id = transaction_app_id(stream, checkpoint)
        self.known = KnownKeys(self.silver, ("transaction_id",), kept_keys(checkpoint, self.silver))
        self.rules = AlertRules.from_config(config)
        self.guard = ReplayGuard(checkpoint)
        self.gate = QualityGate(config, stream, TRANSACTIONS, t.SILVER_TRANSACTIONS.key)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        spark, gate = batch.sparkSession, self.gate
        validated = validate_transactions(batch, gate.expectations).persist()
        firsts = first_arrivals(validated).persist()
        try:
            quality, (invalid,) = gate.measure(validated, F.count_if(F.col("reason").isNotNull()))
            gate.check(validated, quality)  # a rule set to fail stops the batch here
            with self.guard.batch(spark, batch_id) as writes:
                app = self.app_id(spark)

                def write() -> None:
                    if invalid:
                        writes.append(quarantined_transactions(validated), self.quarantine, app)
                    pause_point("silver_transactions:quarantined")  # crash tests only
                    self.append_new(spark, firsts, writes, app)

                gate.record_beside(writes, quality, app, write)
        finally:
            firsts.unpersist()
            validated.unpersist()

    def append_new(
        self, spark: SparkSession, firsts: DataFrame, writes: BatchWrites, app: str
    ) -> None:
        """Screen the transactions of ``firsts`` silver does not hold yet, and append them."""
        unseen, hashes = self.known.new_rows(spark, firsts)
        if len(hashes[0]):
            accounts_now = read_table(spark, self.accounts)
            screened = screen(unseen, accounts_now, self.rules)
            writes.append(screened, self.silver, app)
            self.known.added(spark, hashes, writes.tag(app))


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
