"""Which pipelines and flows a run runs: those named, or those with tables or input."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pyspark.sql import SparkSession

from medallion.config import Config
from medallion.declarations import Pipeline, landing_datasets
from medallion.deployment import flows_of, pipelines_of
from medallion.pipelines import owners
from medallion.storage import folder_exists
from medallion.streams.flows import Flow
from medallion.streams.kafka import topic_has_records
from medallion.streams.run_report import RunReport
from medallion.tables import pipelines_with_tables

log = logging.getLogger(__name__)


def with_input(spark: SparkSession, config: Config) -> Config | None:
    """``config`` narrowed to the pipelines to run: those it names, or else every pipeline
    with tables in the lake already, or with input: a landing folder of one of its datasets
    (files), or, on a lake without tables, a record in one of its topics (Kafka). None when
    no pipeline has either."""
    if config.pipelines:
        return config
    declared = pipelines_of(config)
    chosen = pipelines_with_tables(spark, config)
    if config.source == "files":
        chosen += [p.name for p in declared if _has_landing(spark, config, p)]
    elif not chosen:
        chosen = [p.name for p in declared if _has_records(spark, config, p)]
    names = tuple(p.name for p in declared if p.name in chosen)
    return config.with_options(pipelines=names) if names else None


def chosen_flows(
    spark: SparkSession, config: Config, flows: Sequence[Flow] | None
) -> tuple[Config, tuple[Flow, ...]] | None:
    """The Config narrowed to the pipelines that run, and the flows to run: ``flows`` (the
    Config narrowed to the pipelines declaring them, so no other pipeline's tables are made),
    or else every flow of the pipelines :func:`with_input` finds; None when it finds none."""
    if flows is not None:
        flows = tuple(flows)
        declaring = owners(flows)
        if not config.pipelines and declaring:
            config = config.with_options(pipelines=declaring)
        return config, flows
    narrowed = with_input(spark, config)
    return None if narrowed is None else (narrowed, flows_of(narrowed))


def _has_landing(spark: SparkSession, config: Config, pipeline: Pipeline) -> bool:
    return any(
        folder_exists(spark, config.landing_dir(d)) for d in landing_datasets(pipeline.flows)
    )


def _has_records(spark: SparkSession, config: Config, pipeline: Pipeline) -> bool:
    return any(topic_has_records(spark, config, d) for d in landing_datasets(pipeline.flows))


def nothing_to_run(config: Config) -> RunReport:
    """An empty report, after one warning that says where input was looked for."""
    datasets = landing_datasets(flows_of(config))
    if config.source == "kafka":
        where = f"records in its topics ({', '.join(config.kafka.topic(d) for d in datasets)})"
    else:
        where = f"input under {config.landing} ({', '.join(f'{d}/' for d in datasets)})"
    log.warning(
        "nothing to run: no pipeline has %s or tables in %s; land input, or name a pipeline "
        "with --pipeline",
        where,
        config.lake,
    )
    return RunReport()
