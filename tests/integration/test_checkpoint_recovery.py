"""A kill during a checkpoint log write leaves a hidden temp file; the next start still works."""

from __future__ import annotations

import uuid

import pytest
from lake_checks import assert_lake_matches
from oracle import expected_from
from pyspark.errors import PySparkException

from medallion.pipelines.retail.generator import generate
from medallion.streams.checkpoints import discard_abandoned_writes
from medallion.streams.runner import run_available_now
from medallion.streams.sources import delta_stream
from medallion.tables import ensure_tables

pytestmark = pytest.mark.slow  # left out of make test-fast (docs/testing.md)


def _abandon_first_offset_write(checkpoint):
    """What a SIGKILL between writing and renaming ``offsets/0`` leaves behind."""
    offsets = checkpoint / "offsets"
    offsets.mkdir(parents=True)
    temp = offsets / f".0.{uuid.uuid4()}.tmp"
    temp.write_text(
        'v1\n{"batchWatermarkMs":0,"batchTimestampMs":0,"conf":{}}\n{"sourceVersion":1}\n'
    )
    (offsets / f".{temp.name}.crc").write_bytes(b"crc")


def test_plain_spark_refuses_such_a_checkpoint_and_medallion_recovers(
    spark, config, dirs, tmp_path
):
    landing, lake = dirs
    generate(str(landing), events=200, customers=20, files=1, seed=5)
    ensure_tables(spark, config)

    stuck = tmp_path / "plain"
    _abandon_first_offset_write(stuck)
    plain = (
        delta_stream(spark, config.table("bronze/events"))
        .writeStream.format("noop")
        .option("checkpointLocation", str(stuck))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(PySparkException, match="STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY"):
        plain.awaitTermination()

    for stream in ("bronze_events", "silver_customers", "gold_customer_changes"):
        _abandon_first_offset_write(lake / "_checkpoints" / stream)
    run_available_now(spark, config)
    assert_lake_matches(spark, config, expected_from(landing))
    assert discard_abandoned_writes(str(lake / "_checkpoints")) == []
