"""What a run checks before its streams start, and again while they run: a lost checkpoint or a
replaced or missing landing file is refused, and input lost before bronze read it is recorded."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import SparkSession

from medallion.config import Config
from medallion.errors import PipelineError
from medallion.streams import fusion
from medallion.streams.checkpoints import lost_checkpoint, replaced_landing_files
from medallion.streams.flows import Flow
from medallion.streams.flows import flow as _flow
from medallion.streams.kafka_gaps import record_kafka_gaps
from medallion.streams.missing_files import (
    missing_files_refusal,
    record_missing_files,
    start_checking,
)


def check_landing(config: Config, flows: Sequence[Flow]) -> None:
    """Stop with a PipelineError when a landing file a flow read has been replaced since."""
    for flow in flows:
        refusal = replaced_landing_files(config, flow.name, flow.reads)
        if refusal:
            raise PipelineError(refusal)


def refuse_unsafe_starts(spark: SparkSession, config: Config, flows: Sequence[Flow]) -> None:
    """Before a run touches anything: refuse a flow whose checkpoint was lost while its tables
    hold data, or one that read a landing file that has been replaced since. A flow its head
    carries has no checkpoint of its own (streams/fusion.py), unless its head never ran fused."""
    members = [_flow(name) for flow in flows for name in flow.fuses]
    lost_members = [m for m in members if fusion.lost_member_checkpoint(spark, config, m)]
    for flow in (*flows, *lost_members):
        refusal = lost_checkpoint(spark, config, flow.name, flow.writes) or missing_files_refusal(
            config, flow.name, flow.reads
        )
        if refusal:
            raise PipelineError(refusal)
    check_landing(config, flows)


def record_gaps(spark: SparkSession, config: Config, flows: Sequence[Flow]) -> None:
    """Record input that bronze lost before it could read it (medallion/gaps.py), for the
    batches committed since the last check: a run catches up on one a crash cut short."""
    for flow in flows:
        if flow.layer != "bronze":
            continue
        if config.source == "kafka":
            record_kafka_gaps(spark, config, flow.name)
        else:
            start_checking(config, flow.name, flow.reads)
            record_missing_files(spark, config, flow.name, flow.reads, flow.writes[0])
