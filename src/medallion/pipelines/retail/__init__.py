"""Retail: a clickstream (events) and customer changes, bronze to gold."""

from __future__ import annotations

from pyspark.sql import functions as F

from medallion.declarations import Pipeline, QuarantineReplay
from medallion.pipelines import register
from medallion.pipelines.retail.contract import CUSTOMER_CHANGES, EVENTS
from medallion.pipelines.retail.customers import KEPT_HISTORY
from medallion.pipelines.retail.flows import FLOWS
from medallion.pipelines.retail.generator import generate_sized
from medallion.pipelines.retail.revenue import REVENUE_COUNTRY, revenue_of
from medallion.pipelines.retail.tables import EVENTS_QUARANTINE, TABLES
from medallion.pipelines.retail.transforms.gold import hourly_product_metrics, with_hour_window
from medallion.pipelines.retail.transforms.silver import validate_events
from medallion.pipelines.retail.views import VIEWS
from medallion.subjects import Recompute, Subjects

# A shopper is one id space: the events' user_id is the customers' customer_id. Gold's hourly
# metrics and the revenue by country name nobody, so an erasure recomputes the hours the
# subject's events fell in and the days of their purchases.
SUBJECTS = Subjects(
    {EVENTS.dataset: "user_id", CUSTOMER_CHANGES.dataset: "customer_id"},
    recomputes=(
        Recompute(
            "gold/hourly_product_metrics",
            "silver/events",
            "window_start",
            with_hour_window,
            lambda _spark, _config, events: hourly_product_metrics(events),
        ),
        Recompute(
            "gold/daily_revenue_by_country",
            "silver/events",
            "event_date",
            lambda events: events.where(F.col("event_type") == "purchase"),
            revenue_of,
        ),
    ),
)


RETAIL = register(
    Pipeline(
        "retail",
        TABLES,
        FLOWS,
        generate=generate_sized,
        title="Retail: gold and quality",
        views=VIEWS,
        settings=(KEPT_HISTORY.setting(), REVENUE_COUNTRY),
        contracts=(EVENTS, CUSTOMER_CHANGES),
        replays=(
            QuarantineReplay(
                EVENTS_QUARANTINE,
                "silver_events",
                EVENTS.dataset,
                validate_events,
                key=("event_id",),
                # Fused into bronze_events, gold's hourly metrics never read silver's appends.
                feeds=("gold_hourly_product_metrics",),
            ),
        ),
        subjects=SUBJECTS,
    )
)
