"""Retail: a clickstream (events) and customer changes, bronze to gold."""

from __future__ import annotations

from medallion.declarations import Pipeline, QuarantineReplay
from medallion.generate import FaultRates
from medallion.pipelines import register
from medallion.pipelines.retail.contract import CUSTOMER_CHANGES, EVENTS
from medallion.pipelines.retail.flows import FLOWS
from medallion.pipelines.retail.generator import generate
from medallion.pipelines.retail.tables import CUSTOMERS_QUARANTINE, EVENTS_QUARANTINE, TABLES
from medallion.pipelines.retail.transforms.customers import validate_changes
from medallion.pipelines.retail.transforms.silver import validate_events
from medallion.pipelines.retail.views import VIEWS


def generate_retail(
    landing: str,
    records: int = 1000,
    files: int = 4,
    seed: int = 42,
    faults: FaultRates | None = None,
    customers: int = 200,
    events: int | None = None,
    **_other_sizes: int,
) -> dict[str, list[str]]:
    """``events`` events (default ``records``) and ``customers`` customer changes."""
    return generate(landing, records if events is None else events, customers, files, seed, faults)


RETAIL = register(
    Pipeline(
        "retail",
        TABLES,
        FLOWS,
        generate=generate_retail,
        title="Retail: gold and quality",
        views=VIEWS,
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
            QuarantineReplay(
                CUSTOMERS_QUARANTINE, "silver_customers", CUSTOMER_CHANGES.dataset, validate_changes
            ),
        ),
    )
)
