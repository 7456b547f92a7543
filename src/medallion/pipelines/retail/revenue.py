"""``gold/daily_revenue_by_country``: revenue and purchases per day and country.

By default (setting ``revenue_country=at_purchase``) a purchase counts under the country its
customer had when they bought (transforms/customers.py), so gold is a pure function of the
input, whatever the order or batching in which purchases and customer changes land. The stream
reads two sources: silver's events and the Change Data Feed of ``silver/customers_history``.
Each batch recomputes, from silver and the history, every day it may have changed: the days of
its purchases, and the days of the purchases its changed customers made at or after the
earliest change it brought. One commit replaces those days' rows. A recomputation is the same
whenever it runs, so a replay, a lost checkpoint or a batch that reads ahead is harmless.

``revenue_country=at_processing`` keeps the meaning from before the history: the country as
``silver/customers`` knows it when the batch runs, added by a MERGE once per batch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import date

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from medallion.config import Config
from medallion.declarations import Flow
from medallion.deployment import choice_setting
from medallion.errors import PipelineError
from medallion.faults import pause_point
from medallion.pipeline_settings import ChoiceSetting
from medallion.pipelines.retail.customers import KEPT_HISTORY
from medallion.pipelines.retail.transforms.customers import (
    CUSTOMERS,
    daily_revenue_by_country,
    enrich_purchases,
    enrich_purchases_at_purchase,
)
from medallion.storage import delete_folder
from medallion.streams.checkpoint_files import source_count
from medallion.streams.exactly_once import ReplayGuard
from medallion.streams.sinks import (
    Trigger,
    start_delta_foreach_batch,
    start_foreach_batch,
    transaction_app_id,
)
from medallion.streams.sources import delta_stream
from medallion.tables import read_table
from medallion.transforms.history import History

log = logging.getLogger(__name__)

STREAM = "gold_daily_revenue_by_country"
GOLD = "gold/daily_revenue_by_country"
AT_PURCHASE, AT_PROCESSING = "at_purchase", "at_processing"
REVENUE_COUNTRY = ChoiceSetting(
    "revenue_country",
    (AT_PURCHASE, AT_PROCESSING),
    f"the country {GOLD} counts a purchase under: the customer's at the time of the purchase "
    "(at_purchase), or as silver/customers knows it when the batch runs (at_processing)",
)
_ADD_REVENUE = """
    WHEN MATCHED THEN UPDATE SET t.revenue = t.revenue + s.revenue,
                                 t.purchases = t.purchases + s.purchases
    WHEN NOT MATCHED THEN INSERT *
"""
# The two sources of the at_purchase stream: silver's events, then the history's feed.
_AT_PURCHASE_SOURCES = 2


def purchases_of(events: DataFrame) -> DataFrame:
    """The purchase events among ``events``."""
    return events.where(F.col("event_type") == "purchase")


def customer_changes(spark: SparkSession, config: Config) -> DataFrame:
    """Every valid customer change record that ``silver/customers_history`` holds."""
    history = read_table(spark, config.table(KEPT_HISTORY.table_key))
    return History(CUSTOMERS).changes_of(history)


def revenue_at_processing(spark: SparkSession, config: Config, events: DataFrame) -> DataFrame:
    """Gold's revenue rows of ``events``' purchases, each under its customer's country as
    ``silver/customers`` knows it now."""
    customers = read_table(spark, config.table("silver/customers"))
    return daily_revenue_by_country(enrich_purchases(purchases_of(events), customers))


def revenue_at_purchase(spark: SparkSession, config: Config, events: DataFrame) -> DataFrame:
    """Gold's revenue rows of ``events``' purchases, each under the country its customer had
    at the time of the purchase."""
    changes = customer_changes(spark, config)
    return daily_revenue_by_country(enrich_purchases_at_purchase(purchases_of(events), changes))


def revenue_of(spark: SparkSession, config: Config, events: DataFrame) -> DataFrame:
    """Gold's revenue rows of ``events``' purchases, under the country the setting
    ``revenue_country`` chooses (an erasure's recompute: medallion/subjects.py)."""
    if choice_setting(config, REVENUE_COUNTRY.name) == AT_PROCESSING:
        return revenue_at_processing(spark, config, events)
    return revenue_at_purchase(spark, config, events)


def revenue_inputs(events: DataFrame, history_feed: DataFrame) -> DataFrame:
    """One row per thing that moves revenue: a purchase (``purchase`` true, ``customer_id``,
    ``at`` its time, ``event_date``), or a changed history row (``customer_id``, ``at`` the
    earliest ``updated_at`` of the changes it holds: no purchase before it can change)."""
    purchases = purchases_of(events).select(
        F.lit(True).alias("purchase"),
        F.col("user_id").alias(CUSTOMERS.key),
        F.col("event_timestamp").alias("at"),
        "event_date",
    )
    changed = history_feed.select(
        F.lit(False).alias("purchase"),
        CUSTOMERS.key,
        F.array_min(F.col("_changes.updated_at")).alias("at"),
        F.lit(None).cast("date").alias("event_date"),
    )
    return purchases.unionByName(changed)


def changed_days(purchases: DataFrame, inputs: DataFrame) -> DataFrame:
    """The ``event_date`` of every purchase whose country ``inputs``' changed customers may
    have changed: theirs, at or after the earliest change of each (all of them when a change
    has no time)."""
    changed = (
        inputs.where(~F.col("purchase"))
        .groupBy(CUSTOMERS.key)
        .agg(
            F.min("at").alias("_since"),
            F.max(F.col("at").isNull()).alias("_any_time"),
        )
    )
    joined = purchases.join(changed, F.col("user_id") == F.col(CUSTOMERS.key))
    touched = F.col("_any_time") | (F.col("event_timestamp") >= F.col("_since"))
    return joined.where(touched).select("event_date")


def days_predicate(days: list[date]) -> str:
    """A SQL predicate on ``event_date`` for these days (dates, so nothing to escape).

    >>> days_predicate([date(2026, 11, 20), date(2026, 11, 21)])
    "event_date IN (DATE'2026-11-20', DATE'2026-11-21')"
    """
    listed = ", ".join(f"DATE'{d.isoformat()}'" for d in days)
    return f"event_date IN ({listed})"


class RevenueAtPurchase:
    """The ``foreachBatch`` function of the at_purchase stream: recompute the days the batch
    may have changed and replace their rows, in one commit, once per batch."""

    def __init__(self, config: Config, checkpoint: str) -> None:
        self.config = config
        self.app_id = transaction_app_id(STREAM, checkpoint)
        self.guard = ReplayGuard(checkpoint)

    def days(self, spark: SparkSession, inputs: DataFrame) -> list[date]:
        """The days whose rows the batch of ``inputs`` may have changed, sorted."""
        days = inputs.where(F.col("purchase")).select("event_date")
        if not inputs.where(~F.col("purchase")).isEmpty():
            silver = purchases_of(read_table(spark, self.config.table("silver/events")))
            days = days.union(changed_days(silver, inputs))
        return sorted(r.event_date for r in days.distinct().collect() if r.event_date is not None)

    def __call__(self, inputs: DataFrame, batch_id: int) -> None:
        spark = inputs.sparkSession
        inputs = inputs.persist()  # read twice, and counted once in the stream's progress
        try:
            days = self.days(spark, inputs)
        finally:
            inputs.unpersist()
        if not days:
            return
        events = read_table(spark, self.config.table("silver/events"))
        in_days = events.where(F.col("event_date").isin(days))
        totals = revenue_at_purchase(spark, self.config, in_days)
        gold = self.config.table(GOLD)
        with self.guard.batch(spark, batch_id) as writes:
            writes.replace_where(gold, totals, days_predicate(days), self.app_id(spark))
        pause_point("gold_revenue:replaced")  # days replaced, the batch not yet committed


def gold_revenue_batch(
    config: Config, checkpoint: str, stream: str | None = None
) -> Callable[[DataFrame, int], None]:
    """The foreachBatch function of the at_processing stream.

    Each purchase of the batch is joined with ``silver/customers`` as it is now (a
    stream-static join), counted under its customer's country or ``unknown``, and the
    batch's totals are added to gold by a MERGE that happens once per batch
    (streams/exactly_once.py): a replayed batch is skipped, so no purchase is counted twice.
    """
    gold = config.table(GOLD)
    app_id = transaction_app_id(stream or STREAM, checkpoint)
    guard = ReplayGuard(checkpoint)

    def process(batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        purchases = purchases_of(batch).persist()
        try:
            if purchases.isEmpty():
                return
            totals = revenue_at_processing(spark, config, purchases)
            with guard.batch(spark, batch_id) as writes:
                writes.merge(gold, totals, ["event_date", "country"], _ADD_REVENUE, app_id(spark))
        finally:
            purchases.unpersist()

    return process


def start_gold_revenue(
    spark: SparkSession, config: Config, flow: Flow, trigger: Trigger
) -> StreamingQuery:
    """Start ``gold_daily_revenue_by_country`` with the meaning ``revenue_country`` chooses.

    A checkpoint of the at_processing stream (a lake from before the history) is set aside
    when the at_purchase stream starts: its first batch recomputes every day from silver. The
    other way is refused, since an additive stream cannot start on recomputed rows.
    """
    checkpoint = config.checkpoint(flow.name)
    sources = source_count(checkpoint)
    if choice_setting(config, REVENUE_COUNTRY.name) == AT_PROCESSING:
        if sources == _AT_PURCHASE_SOURCES:
            table = config.table(GOLD)
            raise PipelineError(
                f"{GOLD} counts revenue under the country at purchase time; to count it as "
                "silver/customers knows it when a batch runs (revenue_country=at_processing), "
                f"rebuild it: `medallion reset --lake {config.lake} --layer {table.layer} "
                f"--table {GOLD}` (docs/retail.md)"
            )
        return start_delta_foreach_batch(
            spark, config, trigger, flow.name, flow.source.key, gold_revenue_batch
        )
    if sources is not None and sources != _AT_PURCHASE_SOURCES:
        log.warning(
            "%s: counting revenue under the country at purchase time (revenue_country); "
            "every day is recomputed from silver once",
            flow.name,
        )
        delete_folder(spark, checkpoint)
    events = delta_stream(
        spark,
        config.table(flow.source.key),
        config.source_options(flow.name),
        checkpoint=checkpoint,
    )
    history = delta_stream(spark, config.table(KEPT_HISTORY.table_key), change_feed=True)
    inputs = revenue_inputs(events, history)
    return start_foreach_batch(
        inputs, RevenueAtPurchase(config, checkpoint), checkpoint, trigger, flow.name
    )
