"""A lake from before gold/hourly_product_users: its keys are filled once, from silver exactly
as far as the gold stream has read, and gold stays exact as the stream resumes."""

from __future__ import annotations

import shutil

from lake_checks import assert_lake_matches
from oracle import expected_from

from medallion.config import Config
from medallion.generate import generate
from medallion.ops.checkpoints import DeltaPosition
from medallion.streams.runner import run_available_now
from medallion.streams.upgrade import rows_read
from medallion.tables import read_table, unregister_table


def test_a_lake_without_the_users_table_gets_it_from_silver_and_stays_exact(spark, dirs):
    landing, lake = dirs
    config = Config(landing=str(landing), lake=str(lake))
    generate(str(landing), events=800, customers=60, files=2, seed=21)
    run_available_now(spark, config)
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


def test_a_stream_stopped_inside_a_version_read_its_first_files(spark, tmp_path):
    """A Delta source's offset (v, i): every version before v, and the first i + 1 data files
    that version v added, in the commit's order."""
    config = Config(landing=str(tmp_path / "landing"), lake=str(tmp_path / "lake"))
    silver = config.table("silver/events")
    columns = "user_id string, product_id string, event_timestamp timestamp, event_date date"
    rows = [(f"u{i}", "p1", None, None) for i in range(6)]
    spark.createDataFrame(rows[:2], columns).coalesce(1).write.format("delta").save(silver.path)
    # Version 1 adds two files of two rows each.
    spark.createDataFrame(rows[2:], columns).repartition(2).write.format("delta").mode(
        "append"
    ).save(silver.path)
    added = [
        path
        for path in read_table(spark, silver, 1).inputFiles()
        if path not in read_table(spark, silver, 0).inputFiles()
    ]
    assert len(added) == 2
    whole = rows_read(spark, silver, DeltaPosition(version=1, index=-1, starting=False))
    assert sorted(r.user_id for r in whole.collect()) == ["u0", "u1"]
    first_file = rows_read(spark, silver, DeltaPosition(version=1, index=0, starting=False))
    got = sorted(r.user_id for r in first_file.collect())
    assert got[:2] == ["u0", "u1"] and len(got) == 4
    both = rows_read(spark, silver, DeltaPosition(version=2, index=-1, starting=False))
    assert sorted(r.user_id for r in both.collect()) == [f"u{i}" for i in range(6)]
