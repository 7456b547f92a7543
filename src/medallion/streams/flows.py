"""The named streams of the pipeline, what each reads and writes, and their order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from medallion.config import Config
from medallion.errors import PipelineError
from medallion.streams import customers
from medallion.streams.events import (
    STAGE_STREAMS,
    STAGES,
    events_batch,
    gold_hourly_batch,
    lost_users_refusal,
    silver_events_batch,
)
from medallion.streams.sinks import Trigger, start_delta_foreach_batch, start_foreach_batch
from medallion.streams.sources import input_lines
from medallion.streams.upgrade import backfill_hourly_users


@dataclass(frozen=True)
class Flow:
    """One named stream: its query name (also its checkpoint folder), layer, input and outputs.

    ``fuses`` names the flows downstream of it whose work its batches carry out too, in order
    (streams/fusion.py): those flows run as streams of their own only while they catch up.
    ``min_interval_seconds`` is the shortest trigger interval it takes when streaming: a flow
    whose freshness matters less than the CPU it would take from the others polls less often.
    """

    name: str
    layer: str
    reads: str
    writes: tuple[str, ...]
    start: Callable[..., StreamingQuery]
    fuses: tuple[str, ...] = ()
    min_interval_seconds: float = 0.0


def start_events(
    spark: SparkSession,
    config: Config,
    trigger: Trigger,
    fused: Sequence[str] = (STAGE_STREAMS["silver"], STAGE_STREAMS["gold"]),
) -> StreamingQuery:
    """Start ``bronze_events``: the input lines (landing files or the events topic) through
    bronze, and through the stages of the ``fused`` flows (all of them unless some catch up)."""
    name = STAGE_STREAMS["bronze"]
    stages = ("bronze", *(s for s in STAGES[1:] if STAGE_STREAMS[s] in fused))
    if "gold" in stages and (refusal := lost_users_refusal(spark, config)):
        raise PipelineError(refusal)
    checkpoint = config.checkpoint(name)
    return start_foreach_batch(
        input_lines(spark, config, "events"),
        events_batch(config, checkpoint, stages),
        checkpoint,
        trigger,
        name,
    )


def _start_silver_events(spark: SparkSession, config: Config, trigger: Trigger) -> StreamingQuery:
    return start_delta_foreach_batch(
        spark, config, trigger, "silver_events", "bronze/events", silver_events_batch
    )


def _start_gold_hourly(spark: SparkSession, config: Config, trigger: Trigger) -> StreamingQuery:
    backfill_hourly_users(spark, config)
    return start_delta_foreach_batch(
        spark, config, trigger, "gold_hourly_product_metrics", "silver/events", gold_hourly_batch
    )


CUSTOMER_FLOWS: tuple[Flow, ...] = (
    Flow(
        "bronze_customers",
        "bronze",
        "landing/customers",
        ("bronze/customers",),
        customers.start_bronze_customers,
    ),
    Flow(
        "silver_customers",
        "silver",
        "bronze/customers",
        ("silver/customers", "silver/customer_tombstones", "silver/customers_quarantine"),
        customers.start_silver_customers,
    ),
    Flow(
        "gold_customer_changes",
        "gold",
        "silver/customers (change data feed)",
        ("gold/customer_changes",),
        customers.start_gold_customer_changes,
    ),
    Flow(
        "gold_daily_revenue_by_country",
        "gold",
        "silver/events + silver/customers",
        ("gold/daily_revenue_by_country",),
        customers.start_gold_revenue,
        # A daily total per country: refreshed every 10 s while streaming, so that its MERGE
        # does not run after every batch of events and take their cores.
        min_interval_seconds=10.0,
    ),
)

FLOWS: tuple[Flow, ...] = (
    Flow(
        "bronze_events",
        "bronze",
        "landing/events",
        ("bronze/events",),
        start_events,
        fuses=("silver_events", "gold_hourly_product_metrics"),
    ),
    Flow(
        "silver_events",
        "silver",
        "bronze/events",
        ("silver/events", "silver/events_quarantine"),
        _start_silver_events,
    ),
    Flow(
        "gold_hourly_product_metrics",
        "gold",
        "silver/events",
        ("gold/hourly_product_metrics", "gold/hourly_product_users"),
        _start_gold_hourly,
    ),
    *CUSTOMER_FLOWS,
)

LAYERS = ("bronze", "silver", "gold")


def flows_by_layer(flows: tuple[Flow, ...] = FLOWS) -> list[tuple[str, list[Flow]]]:
    """The flows grouped by layer, upstream layers first."""
    return [(layer, [f for f in flows if f.layer == layer]) for layer in LAYERS]


def flow(name: str) -> Flow:
    """The flow with this query name."""
    for candidate in FLOWS:
        if candidate.name == name:
            return candidate
    raise KeyError(f"unknown stream {name!r}; known: {', '.join(f.name for f in FLOWS)}")


def fusion_head(name: str, flows: Sequence[Flow] = FLOWS) -> Flow | None:
    """The flow whose batches carry out the work of flow ``name``, if it is fused into one."""
    return next((f for f in flows if name in f.fuses), None)
