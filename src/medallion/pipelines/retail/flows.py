"""The retail flows: what each stream reads and writes, and how it starts."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from medallion.config import Config
from medallion.declarations import Flow, Landing
from medallion.errors import PipelineError
from medallion.pipelines.blocks import AppendWhere, bronze_append
from medallion.pipelines.retail import customers, revenue
from medallion.pipelines.retail import tables as t
from medallion.pipelines.retail.catch_up import GoldHourlyBatch, SilverEventsBatch
from medallion.pipelines.retail.contract import CUSTOMER_CHANGES
from medallion.pipelines.retail.events import (
    STAGES,
    EventsBatch,
    lost_users_refusal,
)
from medallion.pipelines.retail.upgrade import backfill_hourly_users
from medallion.streams.sinks import (
    Trigger,
    start_delta_foreach_batch,
    start_foreach_batch,
)
from medallion.streams.sources import input_lines


def start_events(
    spark: SparkSession,
    config: Config,
    flow: Flow,
    trigger: Trigger,
    fused: Sequence[str] | None = None,
) -> StreamingQuery:
    """Start ``bronze_events``: the input lines (landing files or the events topic) through
    bronze, and through the stages of the ``fused`` flows (default all it fuses, silver's then
    gold's; fewer while some catch up)."""
    assert isinstance(flow.source, Landing)
    fused = flow.fuses if fused is None else fused
    stages = ("bronze", *(s for s, f in zip(STAGES[1:], flow.fuses, strict=True) if f in fused))
    if "gold" in stages and (refusal := lost_users_refusal(spark, config)):
        raise PipelineError(refusal)
    checkpoint = config.checkpoint(flow.name)
    return start_foreach_batch(
        input_lines(spark, config, flow.source.dataset),
        EventsBatch(config, flow.name, checkpoint, stages),
        checkpoint,
        trigger,
        flow.name,
    )


def start_gold_hourly(
    spark: SparkSession, config: Config, flow: Flow, trigger: Trigger
) -> StreamingQuery:
    """Start ``gold_hourly_product_metrics`` as a stream of its own (while it catches up),
    once the users it counted are known (upgrade.py)."""
    backfill_hourly_users(spark, config, flow.name)
    return start_delta_foreach_batch(spark, config, flow, trigger)


EVENT_FLOWS: tuple[Flow, ...] = (
    Flow(
        "bronze_events",
        "bronze",
        Landing("events"),
        (t.BRONZE_EVENTS,),
        start_events,
        fuses=("silver_events", "gold_hourly_product_metrics"),
    ),
    Flow(
        "silver_events",
        "silver",
        t.BRONZE_EVENTS,
        (t.SILVER_EVENTS, t.EVENTS_QUARANTINE),
        batch=SilverEventsBatch,
    ),
    Flow(
        "gold_hourly_product_metrics",
        "gold",
        t.SILVER_EVENTS,
        (t.HOURLY_PRODUCT_METRICS, t.HOURLY_PRODUCT_USERS),
        start_gold_hourly,
        batch=GoldHourlyBatch,
    ),
)

CUSTOMER_FLOWS: tuple[Flow, ...] = (
    Flow(
        "bronze_customers",
        "bronze",
        Landing("customers"),
        (t.BRONZE_CUSTOMERS,),
        bronze_append(CUSTOMER_CHANGES),  # every line, unchanged
    ),
    Flow(
        "silver_customers",
        "silver",
        t.BRONZE_CUSTOMERS,
        (t.SILVER_CUSTOMERS, t.CUSTOMER_TOMBSTONES, t.CUSTOMERS_QUARANTINE, t.CUSTOMERS_HISTORY),
        batch=customers.silver_customers_batch,
    ),
    Flow(
        "gold_customer_changes",
        "gold",
        t.SILVER_CUSTOMERS,
        (t.CUSTOMER_CHANGES,),
        AppendWhere(),  # every change of silver/customers, from its Change Data Feed
        change_feed=True,
    ),
    Flow(
        "gold_daily_revenue_by_country",
        "gold",
        t.SILVER_EVENTS,
        (t.DAILY_REVENUE_BY_COUNTRY, t.REVENUE_PURCHASES),
        revenue.start_gold_revenue,
        # The history's feed by default, silver/customers with revenue_country=at_processing.
        joins=(t.CUSTOMERS_HISTORY, t.SILVER_CUSTOMERS),
        # A daily total per country: refreshed every 10 s while streaming, so that its MERGE
        # does not run after every batch of events and take their cores.
        min_interval_seconds=10.0,
    ),
)

FLOWS = (*EVENT_FLOWS, *CUSTOMER_FLOWS)
