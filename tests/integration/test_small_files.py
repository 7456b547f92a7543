"""Files per table stay bounded over 200 micro-batch-sized commits: medallion compacts a
table once small files pile up (medallion/compaction.py), after an available-now run and
in the background of a streaming run.

Each commit is one small INSERT into ``bronze/events``, standing in for one micro-batch of
the bronze stream (200 real triggers of every stream cost minutes more), followed by the
check a run makes. benchmarks/small_files.py measures the MERGE-written tables (the real
``foreachBatch`` functions) with and without compaction.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from medallion.compaction import MIN_SMALL_FILES, compact_fragmented
from medallion.config import Config
from medallion.console import plain
from medallion.pipelines.retail.generator import generate
from medallion.streams.progress import progress_table
from medallion.streams.runner import run_available_now
from medallion.tables import ensure_tables, read_table

pytestmark = pytest.mark.slow  # left out of make test-fast (docs/testing.md)

BATCHES = 200
CHECK_EVERY = 10


def files_after_each_commit(table: Path) -> list[tuple[str, int]]:
    """(operation, files in the snapshot) after every commit, replaying the JSON log."""
    live: set[str] = set()
    out = []
    for commit in sorted((table / "_delta_log").glob("*.json")):
        operation = ""
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                live.add(action["add"]["path"])
            elif "remove" in action:
                live.discard(action["remove"]["path"])
            elif "commitInfo" in action:
                operation = action["commitInfo"]["operation"]
        out.append((operation, len(live)))
    return out


def test_files_per_table_stay_bounded_over_200_micro_batches(spark, config):
    ensure_tables(spark, config)
    bronze = config.table("bronze/events")
    for batch in range(1, BATCHES + 1):
        spark.sql(
            f"INSERT INTO {bronze.sql_name} (event_id, _raw, _source_file, _ingested_at) "
            f"VALUES ('e{batch}', '{{}}', 'file:/landing/events/{batch}.json', now())"
        )
        if batch % CHECK_EVERY == 0:  # as a streaming run checks, every so often
            compact_fragmented(spark, [bronze])
    commits = files_after_each_commit(Path(bronze.path))
    writes = [files for operation, files in commits if operation == "WRITE"]
    compactions = [files for operation, files in commits if operation == "OPTIMIZE"]
    print(
        f"bronze/events files after 1, 50, 100, 150, 200 batches: "
        f"{[writes[n - 1] for n in (1, 50, 100, 150, 200)]}; "
        f"at most {max(writes)}; {len(compactions)} compactions"
    )
    assert len(writes) == BATCHES
    assert max(writes) < MIN_SMALL_FILES + CHECK_EVERY  # without compaction: 200
    assert len(compactions) >= BATCHES // MIN_SMALL_FILES - 1
    assert spark.read.format("delta").load(bronze.path).count() == BATCHES


def test_an_available_now_run_compacts_a_table_that_piled_up_small_files(spark, tmp_path):
    config = Config(landing=str(tmp_path / "landing"), lake=str(tmp_path / "lake"))
    generate(config.landing, events=200, customers=10, files=1, seed=3)
    first = run_available_now(spark, config)
    assert first.compacted == []
    # The progress table, which every run appends to, gets many small files at once.
    progress = progress_table(config)
    recorded = read_table(spark, progress).collect()
    copies = spark.createDataFrame(
        recorded * (MIN_SMALL_FILES + 10), read_table(spark, progress).schema
    )
    copies.repartition(MIN_SMALL_FILES + 10).write.format("delta").mode("append").save(
        progress.path
    )
    files = Path(progress.path)
    assert files_after_each_commit(files)[-1][1] > MIN_SMALL_FILES
    rows = read_table(spark, progress).count()

    report = run_available_now(spark, config)  # nothing new landed: the check after the run

    assert report.compacted == ["_system/stream_progress"]
    assert "compacted small files: _system/stream_progress" in plain(report.render())
    assert files_after_each_commit(files)[-1][0] == "OPTIMIZE"
    assert read_table(spark, progress).count() >= rows  # the run's own events are added after
