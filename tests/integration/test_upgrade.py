"""A lake from before gold/hourly_product_users: its keys are filled once, from silver exactly
as far as the gold stream has read (the whole upgrade: tests/integration/test_fusion.py)."""

from __future__ import annotations

from medallion.config import Config
from medallion.pipelines.retail.upgrade import rows_read
from medallion.streams.checkpoint_files import DeltaPosition
from medallion.tables import read_table

GOLD = "gold_hourly_product_metrics"  # the stream that read silver


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
    whole = rows_read(
        spark, silver, DeltaPosition(version=1, index=-1, starting=False), stream=GOLD
    )
    assert sorted(r.user_id for r in whole.collect()) == ["u0", "u1"]
    first_file = rows_read(
        spark, silver, DeltaPosition(version=1, index=0, starting=False), stream=GOLD
    )
    got = sorted(r.user_id for r in first_file.collect())
    assert got[:2] == ["u0", "u1"] and len(got) == 4
    both = rows_read(spark, silver, DeltaPosition(version=2, index=-1, starting=False), stream=GOLD)
    assert sorted(r.user_id for r in both.collect()) == [f"u{i}" for i in range(6)]
