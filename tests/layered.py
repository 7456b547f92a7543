"""A lake as medallion wrote it before fusion: every layer of the events a stream of its own,
with its own checkpoint (silver_events read bronze/events, gold_hourly_product_metrics read
silver/events), and bronze_events' checkpoint without the fused marker."""

from __future__ import annotations

import os

from pyspark.sql import SparkSession

from medallion.config import Config
from medallion.gaps import gaps_table_spec
from medallion.pipelines.retail.flows import FLOWS
from medallion.streams.flows import LAYERS
from medallion.streams.progress import PROGRESS_PROPERTIES, PROGRESS_SCHEMA, progress_table
from medallion.streams.sinks import Trigger, start_flow
from medallion.tables import ensure_tables


def run_layered(spark: SparkSession, config: Config) -> None:
    """One available-now run of every retail flow on its own, layer by layer."""
    config = config.with_options(pipelines=("retail",))
    progress = (progress_table(config), PROGRESS_SCHEMA, PROGRESS_PROPERTIES)
    ensure_tables(spark, config, more=[progress, gaps_table_spec(config)])
    for dataset in ("events", "customers"):
        os.makedirs(config.landing_dir(dataset), exist_ok=True)
    trigger = Trigger(available_now=True)
    for layer in LAYERS:
        queries = [
            start_flow(spark, config, flow, trigger) for flow in FLOWS if flow.layer == layer
        ]
        for query in queries:
            query.awaitTermination()
