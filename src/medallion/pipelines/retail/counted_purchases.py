"""``gold/revenue_purchases``: every purchase that ``gold/daily_revenue_by_country`` counts,
under the country it counts it under, and the batch that keeps the two (revenue_country
at_purchase, the default).

A batch of the stream brings purchases (silver's new events) and customer changes (the Change
Data Feed of ``silver/customers_history``). One MERGE into the ledger counts:

- each purchase not counted yet (by ``event_id``), under the country its customer had at the
  time of the purchase;
- each counted purchase of a changed customer at or after the earliest change it brought,
  under the country the history gives it now, where that differs.

Gold then adds that commit's change feed: a purchase and its revenue under its new country,
and, for one that moved, minus the same under its old one. A batch costs what it brings and
the ledger's scan, not a recomputation of the days it touches from silver.

Exactly once: both writes carry the batch's tag (streams/exactly_once.py). A batch run again
after a crash between them finds the ledger's commit by its tag and adds that commit's feed:
the feed, not the batch's inputs, says what gold adds, so a history that moved in between is
harmless. A source that delivers a purchase again (a lost checkpoint) finds it counted.
"""

from __future__ import annotations

import logging

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.config import Config
from medallion.delta_log import table_id
from medallion.errors import PipelineError
from medallion.faults import pause_point
from medallion.json_columns import MONEY_SUM_TYPE
from medallion.pipelines.retail.customers import KEPT_HISTORY
from medallion.pipelines.retail.tables import DAILY_REVENUE_BY_COUNTRY, REVENUE_PURCHASES
from medallion.pipelines.retail.transforms.customers import (
    CUSTOMERS,
    daily_revenue_by_country,
    enrich_purchases_at_purchase,
)
from medallion.pipelines.retail.upgrade import rows_read
from medallion.sql_names import TableRef
from medallion.storage import delete_folder
from medallion.streams.checkpoint_files import delta_position
from medallion.streams.exactly_once import ReplayGuard
from medallion.streams.sinks import append_batch, transaction_app_id
from medallion.tables import delta_table, holds_data, read_commit_changes, read_table, save
from medallion.transforms.history import History

log = logging.getLogger(__name__)

PURCHASE_COLUMNS = ("event_id", "user_id", "event_timestamp", "event_date", "revenue")
_COUNT = """
    WHEN MATCHED AND t.country <> s.country THEN UPDATE SET t.country = s.country
    WHEN NOT MATCHED THEN INSERT *
"""
# A (day, country) whose purchases all moved away leaves gold, as it would in a recomputation.
_ADD = """
    WHEN MATCHED AND t.purchases + s.purchases = 0 THEN DELETE
    WHEN MATCHED THEN UPDATE SET t.revenue = t.revenue + s.revenue,
                                 t.purchases = t.purchases + s.purchases
    WHEN NOT MATCHED AND s.purchases > 0 THEN INSERT *
"""
_SIGNS = {"insert": 1, "update_postimage": 1, "update_preimage": -1, "delete": -1}


def purchases_of(events: DataFrame) -> DataFrame:
    """The purchase events among ``events``."""
    return events.where(F.col("event_type") == "purchase")


def customer_changes(spark: SparkSession, config: Config) -> DataFrame:
    """Every valid customer change record that ``silver/customers_history`` holds."""
    history = read_table(spark, config.table(KEPT_HISTORY.table_key))
    return History(CUSTOMERS).changes_of(history)


def revenue_inputs(events: DataFrame, history_feed: DataFrame) -> DataFrame:
    """One row per thing that moves revenue: a purchase (``purchase`` true, its
    :data:`PURCHASE_COLUMNS`, ``customer_id`` and ``at`` its time), or a changed history row
    (``customer_id``, ``at`` the earliest ``updated_at`` of the changes it holds: no purchase
    before it can change)."""
    purchases = purchases_of(events).select(
        F.lit(True).alias("purchase"),
        F.col("user_id").alias(CUSTOMERS.key),
        F.col("event_timestamp").alias("at"),
        *PURCHASE_COLUMNS,
    )
    changed = history_feed.select(
        F.lit(False).alias("purchase"),
        CUSTOMERS.key,
        F.array_min(F.col("_changes.updated_at")).alias("at"),
        *(F.lit(None).cast(purchases.schema[c].dataType).alias(c) for c in PURCHASE_COLUMNS),
    )
    return purchases.unionByName(changed)


def purchases_moved_by(changes: DataFrame, counted: DataFrame) -> DataFrame:
    """The ``counted`` purchases whose country ``changes`` (revenue inputs that are not
    purchases) may move: their customers', at or after the earliest change of each (all of
    them when a change has no time)."""
    changed = changes.groupBy(CUSTOMERS.key).agg(
        F.min("at").alias("_since"), F.max(F.col("at").isNull()).alias("_any_time")
    )
    joined = counted.join(changed, F.col("user_id") == F.col(CUSTOMERS.key))
    moved = F.col("_any_time") | (F.col("event_timestamp") >= F.col("_since"))
    return joined.where(moved).select(*PURCHASE_COLUMNS)


def to_count(inputs: DataFrame, counted: DataFrame, changes: DataFrame) -> DataFrame:
    """The ledger's MERGE source for a batch of revenue ``inputs``: its purchases and the
    ``counted`` ones its customer changes may move, each once, under the country the customer
    ``changes`` (change records) give it at the time of the purchase."""
    candidates = inputs.where(F.col("purchase")).select(*PURCHASE_COLUMNS)
    changed = inputs.where(~F.col("purchase"))
    if not changed.isEmpty():  # no scan of the ledger for a batch of purchases alone
        moved = purchases_moved_by(changed, counted)
        candidates = candidates.unionByName(moved).dropDuplicates(["event_id"])
    attributed = enrich_purchases_at_purchase(candidates, changes)
    return attributed.select(*REVENUE_PURCHASES.columns)


def revenue_increments(ledger_changes: DataFrame) -> DataFrame:
    """What a ledger commit's change feed adds to gold per (``event_date``, ``country``):
    revenue and purchases counted, minus those no longer counted there."""
    sign = F.lit(None).cast("int")
    for change_type, value in _SIGNS.items():
        sign = F.when(F.col("_change_type") == change_type, F.lit(value)).otherwise(sign)
    signed = ledger_changes.withColumn("_sign", sign).where(F.col("_sign").isNotNull())
    return signed.groupBy("event_date", "country").agg(
        F.sum(F.col("revenue") * F.col("_sign")).cast(MONEY_SUM_TYPE).alias("revenue"),
        F.sum("_sign").cast("bigint").alias("purchases"),
    )


def counted_revenue(spark: SparkSession, config: Config, events: DataFrame) -> DataFrame:
    """Gold's revenue rows of ``events``' purchases as the ledger counts them (an erasure's
    recompute, medallion/subjects.py): purchases not counted yet are left to the stream."""
    ledger = read_table(spark, config.table(REVENUE_PURCHASES.key))
    counted = ledger.join(purchases_of(events).select("event_id"), "event_id", "left_semi")
    return daily_revenue_by_country(counted)


class RevenueAtPurchase:
    """The ``foreachBatch`` function of the at_purchase stream: count the batch's purchases
    and move the ones its customer changes move, in the ledger, then add the ledger commit's
    change feed to gold; once per batch."""

    def __init__(self, config: Config, stream: str, checkpoint: str) -> None:
        self.ledger = config.table(REVENUE_PURCHASES.key)
        self.gold = config.table(DAILY_REVENUE_BY_COUNTRY.key)
        self.config = config
        self.app_id = transaction_app_id(stream, checkpoint)
        self.guard = ReplayGuard(checkpoint)

    def __call__(self, inputs: DataFrame, batch_id: int) -> None:
        spark = inputs.sparkSession
        inputs = inputs.persist()  # read twice, and counted once in the stream's progress
        try:
            if inputs.isEmpty():
                return
            with self.guard.batch(spark, batch_id) as writes:
                app_id = self.app_id(spark)
                counted = read_table(spark, self.ledger)
                source = to_count(inputs, counted, customer_changes(spark, self.config))
                writes.merge(self.ledger, source, ["event_id"], _COUNT, app_id, into_empty=source)
                pause_point("gold_revenue:counted")  # the ledger written, gold not yet
                version = writes.commit_of(self.ledger, app_id)
                if version is not None:
                    changes = read_commit_changes(spark, self.ledger, version)
                    increments = revenue_increments(changes)
                    keys = ["event_date", "country"]
                    writes.merge(
                        self.gold,
                        increments,
                        keys,
                        _ADD,
                        app_id,
                        into_empty=increments.where(F.col("purchases") > 0),
                    )
            pause_point("gold_revenue:added")  # both written, the batch not yet committed
        finally:
            inputs.unpersist()


def _empty(spark: SparkSession, table: TableRef) -> None:
    if holds_data(spark, table):
        delta_table(spark, table).delete()


def _same_table(first: str | None, second: str | None) -> bool:
    return first is None or second is None or first == second


def start_counting_afresh(spark: SparkSession, config: Config, checkpoint: str) -> None:
    """Empty gold and the ledger, then the stream's checkpoint: its first batch counts every
    purchase of silver again. In this order, so that a crash half-way is finished by the next
    start (a checkpoint that is gone finds gold empty)."""
    _empty(spark, config.table(DAILY_REVENUE_BY_COUNTRY.key))
    _empty(spark, config.table(REVENUE_PURCHASES.key))
    delete_folder(spark, checkpoint)


def fill_ledger(spark: SparkSession, config: Config, stream: str, checkpoint: str) -> None:
    """Give a lake whose gold was counted without the ledger (an earlier medallion) its
    ledger, once: the purchases the stream has read, under the country at the time of each,
    and gold recomputed from them. Gold first and the ledger last, so that a crash half-way
    leaves the ledger empty and the next start does it again. Where the stream stands cannot
    be told (a checkpoint this process cannot read), the stream counts afresh instead."""
    ledger, gold = config.table(REVENUE_PURCHASES.key), config.table(DAILY_REVENUE_BY_COUNTRY.key)
    if holds_data(spark, ledger) or not holds_data(spark, gold):
        return
    silver = config.table("silver/events")
    position = delta_position(checkpoint)
    if position is not None and not _same_table(
        position.table_id, table_id(spark, silver, position.version)
    ):
        position = None  # the checkpoint's first source is not this silver table
    try:
        rows = None if position is None else rows_read(spark, silver, position, stream=stream)
    except PipelineError:  # stopped inside its first snapshot: what it read cannot be listed
        rows, position = None, None
    if position is None:
        log.warning("%s: no ledger to continue from; counting every purchase again", stream)
        start_counting_afresh(spark, config, checkpoint)
        return
    log.info(
        "%s: filling %s from silver/events up to version %d", stream, ledger.key, position.version
    )
    if rows is None:  # the stream has read nothing yet: gold counts nothing
        _empty(spark, gold)
        return
    purchases = purchases_of(rows).select(*PURCHASE_COLUMNS)
    attributed = enrich_purchases_at_purchase(purchases, customer_changes(spark, config))
    counted = attributed.select(*REVENUE_PURCHASES.columns).persist()
    try:
        save(daily_revenue_by_country(counted).write.format("delta").mode("overwrite"), gold)
        append_batch(counted, ledger)
    finally:
        counted.unpersist()
