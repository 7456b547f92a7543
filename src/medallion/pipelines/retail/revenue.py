"""``gold/daily_revenue_by_country``: revenue and purchases per day and country.

By default (setting ``revenue_country=at_purchase``) a purchase counts under the country its
customer had when they bought (transforms/customers.py), so gold is a pure function of the
input, whatever the order or batching in which purchases and customer changes land. The stream
reads two sources, silver's events and the Change Data Feed of ``silver/customers_history``,
and keeps ``gold/revenue_purchases``, the ledger of what gold counts, beside gold
(counted_purchases.py): a batch costs what it brings, not the size of the lake.

``revenue_country=at_processing`` keeps the meaning from before the history: the country as
``silver/customers`` knows it when the batch runs, added by a MERGE once per batch.
"""

from __future__ import annotations

import logging

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from medallion.config import Config
from medallion.declarations import Flow
from medallion.deployment import choice_setting
from medallion.errors import PipelineError
from medallion.pipeline_settings import ChoiceSetting
from medallion.pipelines.retail.counted_purchases import (
    RevenueAtPurchase,
    counted_revenue,
    fill_ledger,
    purchases_of,
    revenue_inputs,
    start_counting_afresh,
)
from medallion.pipelines.retail.customers import KEPT_HISTORY
from medallion.pipelines.retail.tables import DAILY_REVENUE_BY_COUNTRY
from medallion.pipelines.retail.transforms.customers import (
    daily_revenue_by_country,
    enrich_purchases,
)
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

log = logging.getLogger(__name__)

GOLD = DAILY_REVENUE_BY_COUNTRY.key
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


def revenue_at_processing(spark: SparkSession, config: Config, events: DataFrame) -> DataFrame:
    """Gold's revenue rows of ``events``' purchases, each under its customer's country as
    ``silver/customers`` knows it now."""
    customers = read_table(spark, config.table("silver/customers"))
    return daily_revenue_by_country(enrich_purchases(purchases_of(events), customers))


def revenue_of(spark: SparkSession, config: Config, events: DataFrame) -> DataFrame:
    """Gold's revenue rows of ``events``' purchases, under the country the setting
    ``revenue_country`` chooses (an erasure's recompute: medallion/subjects.py)."""
    if choice_setting(config, REVENUE_COUNTRY.name) == AT_PROCESSING:
        return revenue_at_processing(spark, config, events)
    return counted_revenue(spark, config, events)


class RevenueAtProcessing:
    """The foreachBatch function of the at_processing stream.

    Each purchase of the batch is joined with ``silver/customers`` as it is now (a
    stream-static join), counted under its customer's country or ``unknown``, and the
    batch's totals are added to gold by a MERGE that happens once per batch
    (streams/exactly_once.py): a replayed batch is skipped, so no purchase is counted twice.
    """

    def __init__(
        self, config: Config, flow: Flow, checkpoint: str, stream: str | None = None
    ) -> None:
        self.config, self.gold = config, config.table(GOLD)
        self.app_id = transaction_app_id(stream or flow.name, checkpoint)
        self.guard = ReplayGuard(checkpoint)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        purchases = purchases_of(batch).persist()
        try:
            if purchases.isEmpty():
                return
            totals = revenue_at_processing(spark, self.config, purchases)
            with self.guard.batch(spark, batch_id) as writes:
                keys = ["event_date", "country"]
                app_id = self.app_id(spark)
                writes.merge(self.gold, totals, keys, _ADD_REVENUE, app_id, into_empty=totals)
        finally:
            purchases.unpersist()


def start_gold_revenue(
    spark: SparkSession, config: Config, flow: Flow, trigger: Trigger
) -> StreamingQuery:
    """Start ``gold_daily_revenue_by_country`` with the meaning ``revenue_country`` chooses.

    A lake counted by the at_processing stream (from before the history) is counted again
    when the at_purchase stream starts: gold, its ledger and the checkpoint are emptied, and
    the first batch counts every purchase of silver. A lake counted before the ledger gets it
    filled once (counted_purchases.py). The other way is refused, since an additive stream
    cannot start on rows counted at purchase time.
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
        return start_delta_foreach_batch(spark, config, flow, trigger, RevenueAtProcessing)
    if sources is not None and sources != _AT_PURCHASE_SOURCES:
        log.warning(
            "%s: counting revenue under the country at purchase time (revenue_country); "
            "every purchase is counted again once",
            flow.name,
        )
        start_counting_afresh(spark, config, checkpoint)
    else:
        fill_ledger(spark, config, flow.name, checkpoint)
    events = delta_stream(
        spark,
        config.table(flow.source.key),
        config.source_options(flow.name),
        checkpoint=checkpoint,
    )
    history = delta_stream(
        spark, config.table(KEPT_HISTORY.table_key), change_feed=True, checkpoint=checkpoint
    )
    inputs = revenue_inputs(events, history)
    return start_foreach_batch(
        inputs, RevenueAtPurchase(config, flow.name, checkpoint), checkpoint, trigger, flow.name
    )
