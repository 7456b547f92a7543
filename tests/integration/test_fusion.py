"""bronze_events carries each batch through silver and gold (streams/fusion.py): a lake from
before fusion catches up and then runs fused, a rebuilt layer catches up from the layer above,
and a batch replayed after a crash adds nothing twice."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from lake_checks import assert_customers_match, assert_lake_matches, lake_snapshot, rows_of
from lake_copy import copy_lake
from layered import run_layered
from oracle import expected_customers, expected_from
from pyspark.sql import functions as F

from medallion.config import Config
from medallion.errors import PipelineError
from medallion.ops.reset import execute_reset, plan_reset
from medallion.pipelines.retail import events
from medallion.pipelines.retail.events import EventsBatch
from medallion.pipelines.retail.generator import generate
from medallion.streams.fusion import FUSED_MARKER, RESET_MARKER
from medallion.streams.runner import run_available_now
from medallion.tables import ensure_tables, read_table, unregister_table

pytestmark = pytest.mark.slow  # left out of make test-fast (docs/testing.md)

MEMBERS = ("silver_events", "gold_hourly_product_metrics")


def _checkpoints(lake: Path) -> Path:
    return lake / "_checkpoints"


def test_a_lake_from_before_fusion_catches_up_then_runs_fused_and_stays_exact(spark, dirs):
    landing, lake = dirs
    config = Config(landing=str(landing), lake=str(lake))
    generate(str(landing), events=600, customers=60, files=2, seed=41)
    run_layered(spark, config)
    # Silver and gold lag behind bronze, as a stopped layered pipeline can leave them.
    generate(str(landing), events=400, customers=0, files=1, seed=42)
    checkpoints = _checkpoints(lake)
    assert all((checkpoints / m / "commits").is_dir() for m in MEMBERS)
    assert not (checkpoints / "bronze_events" / FUSED_MARKER).exists()

    # The first run of this medallion: bronze alone, then silver and gold from their own
    # checkpoints, and only then is bronze_events marked fused and their checkpoints gone.
    report = run_available_now(spark, config)
    assert report.batches["silver_events"] >= 1 and report.batches["gold_hourly_product_metrics"]
    assert not any((checkpoints / m).exists() for m in MEMBERS)
    marker = json.loads((checkpoints / "bronze_events" / FUSED_MARKER).read_text())
    assert marker == {"fuses": list(MEMBERS)}
    assert_lake_matches(spark, config, expected_from(landing))

    # From now on one stream carries the events through every layer.
    generate(str(landing), events=400, customers=30, files=1, seed=43)
    report = run_available_now(spark, config)
    assert not set(MEMBERS) & set(report.batches)
    assert not any((checkpoints / m).exists() for m in MEMBERS)
    assert_lake_matches(spark, config, expected_from(landing))
    assert_customers_match(spark, config, expected_customers(landing))


def test_a_lake_from_before_the_users_table_gets_it_as_gold_catches_up(spark, dirs):
    landing, lake = dirs
    config = Config(landing=str(landing), lake=str(lake))
    generate(str(landing), events=800, customers=60, files=2, seed=21)
    run_layered(spark, config)
    # The lake as an earlier medallion left it: gold with its sums, no table of users.
    users = config.table("gold/hourly_product_users")
    unregister_table(spark, users)
    shutil.rmtree(users.path)
    # The same users and hours come again, so the users counted before must be known.
    generate(str(landing), events=800, customers=60, files=2, seed=22)
    run_available_now(spark, config)
    expected = expected_from(landing)
    assert_lake_matches(spark, config, expected)
    keys = read_table(spark, users)
    counted = sum(row["unique_users"] for row in expected.gold.values())
    assert keys.count() == keys.distinct().count() == counted


def test_a_lost_member_checkpoint_in_a_lake_from_before_fusion_is_refused(spark, dirs):
    landing, lake = dirs
    config = Config(landing=str(landing), lake=str(lake))
    generate(str(landing), events=300, customers=0, files=1, seed=44)
    run_layered(spark, config)
    before = lake_snapshot(spark, config)
    gold = _checkpoints(lake) / "gold_hourly_product_metrics"
    gold.rename(gold.with_name("moved"))
    with pytest.raises(PipelineError) as refused:
        run_available_now(spark, config)
    assert str(refused.value).startswith(
        f"stream 'gold_hourly_product_metrics' has no checkpoint at {gold}"
    )
    assert lake_snapshot(spark, config) == before, "a refused start wrote something"


@pytest.fixture(scope="module")
def caught_up_lake(spark, tmp_path_factory) -> Path:
    """A lake that ran 500 events and 40 customers, built once for the module; each test that
    resets a layer works on a copy of it (tests/lake_copy.py)."""
    root = tmp_path_factory.mktemp("caught-up")
    config = Config(landing=str(root / "landing"), lake=str(root / "lake"))
    generate(config.landing, events=500, customers=40, files=2, seed=45)
    run_available_now(spark, config)
    return root


@pytest.mark.parametrize("layer", ["silver", "gold"])
def test_a_reset_layer_catches_up_from_the_layer_above_and_an_interrupted_reset_is_refused(
    spark, caught_up_lake, tmp_path, layer
):
    landing, lake = copy_lake(caught_up_lake, tmp_path / "copy")
    config = Config(landing=str(landing), lake=str(lake))

    # A reset cut short after it marked the streams that catch up: every run is refused.
    checkpoints = _checkpoints(lake)
    gold_checkpoint = checkpoints / "gold_hourly_product_metrics"
    gold_checkpoint.mkdir()
    (gold_checkpoint / RESET_MARKER).write_text("")
    with pytest.raises(PipelineError, match="was interrupted before it finished"):
        run_available_now(spark, config)

    execute_reset(spark, config, plan_reset(config, layer))
    caught_up = ("silver_events",) * (layer == "silver") + ("gold_hourly_product_metrics",)
    assert {p.name for p in checkpoints.iterdir() if p.name in MEMBERS} == set(caught_up)
    # New input lands meanwhile: bronze_events runs without the layers that catch up.
    generate(str(landing), events=200, customers=0, files=1, seed=46)
    report = run_available_now(spark, config)
    assert set(caught_up) <= set(report.batches)
    assert not any((checkpoints / m).exists() for m in MEMBERS)
    assert_lake_matches(spark, config, expected_from(landing))
    assert_customers_match(spark, config, expected_customers(landing))


def test_a_batch_replayed_after_silver_committed_adds_its_rows_to_gold_once(
    spark, config, dirs, tmp_path, monkeypatch
):
    landing, _ = dirs
    generate(str(landing), events=300, customers=0, files=1, seed=47)
    ensure_tables(spark, config)
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "metadata").write_text('{"id":"a-query"}')
    lines = spark.read.text(str(landing / "events")).select(
        "value",
        F.col("_metadata.file_path").alias("_source_file"),
        F.lit("2026-11-24 06:00:00").cast("timestamp").alias("_ingested_at"),
    )
    real_write_gold = events.write_gold

    def crash(*args, **kwargs):
        raise RuntimeError("killed between silver's append and gold's MERGE")

    monkeypatch.setattr(events, "write_gold", crash)
    with pytest.raises(RuntimeError, match="killed"):
        EventsBatch(config, "bronze_events", str(checkpoint))(lines, 0)
    assert len(rows_of(config, "silver/events")) > 0
    assert len(rows_of(config, "gold/hourly_product_metrics")) == 0

    # The same batch again, as the restarted query replays it: silver's append is skipped by
    # its transaction version, and gold adds the rows that append inserted.
    monkeypatch.setattr(events, "write_gold", real_write_gold)
    EventsBatch(config, "bronze_events", str(checkpoint))(lines, 0)
    EventsBatch(config, "bronze_events", str(checkpoint))(
        lines, 0
    )  # and once more: nothing changes
    expected = expected_from(landing)
    assert_lake_matches(spark, config, expected)


def test_users_missing_after_gold_first_merge_are_appended_and_lost_users_are_refused(
    spark, dirs, monkeypatch
):
    landing, lake = dirs
    config = Config(landing=str(landing), lake=str(lake))
    generate(str(landing), events=300, customers=0, files=1, seed=48)

    def crash(name: str) -> None:
        if name == "gold_hourly:metrics_merged":
            raise RuntimeError("killed between gold's MERGE and the users it counted")

    # The first batch that reaches gold dies after gold's MERGE: gold holds data, users none.
    monkeypatch.setattr(events, "pause_point", crash)
    with pytest.raises(PipelineError, match="RuntimeError: killed between gold.s MERGE"):
        run_available_now(spark, config)
    users = config.table("gold/hourly_product_users")
    assert len(rows_of(config, "gold/hourly_product_metrics")) > 0
    assert read_table(spark, users).count() == 0
    monkeypatch.undo()
    # That is a crash the replay repairs, not a lost table: the run goes on, exact.
    run_available_now(spark, config)
    assert_lake_matches(spark, config, expected_from(landing))

    # A users table lost after gold counted several batches is refused.
    generate(str(landing), events=300, customers=0, files=1, seed=49)
    run_available_now(spark, config)
    unregister_table(spark, users)
    shutil.rmtree(users.path)
    generate(str(landing), events=100, customers=0, files=1, seed=50)
    with pytest.raises(PipelineError, match="holds no rows while gold/hourly_product_metrics"):
        run_available_now(spark, config)
