"""Files per table stay bounded over 200 micro-batch-sized commits (auto-compaction).

Each commit is one small INSERT into ``bronze/events`` as the pipeline creates it (its table
properties included), standing in for one micro-batch of the bronze stream: 200 real triggers
of every stream cost minutes more. benchmarks/small_files.py measures the MERGE-written
tables (the real ``foreachBatch`` functions) with and without the properties.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from medallion.tables import ensure_tables

BATCHES = 200
# Delta's auto compaction starts once this many small files accumulate (autoCompact.minNumFiles).
MIN_NUM_FILES = 50


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


@pytest.mark.slow
def test_files_per_table_stay_bounded_over_200_micro_batches(spark, config):
    ensure_tables(spark, config)
    bronze = config.table("bronze/events")
    for batch in range(1, BATCHES + 1):
        spark.sql(
            f"INSERT INTO {bronze.sql_name} (event_id, _raw, _source_file, _ingested_at) "
            f"VALUES ('e{batch}', '{{}}', 'file:/landing/events/{batch}.json', now())"
        )
    commits = files_after_each_commit(Path(bronze.path))
    writes = [files for operation, files in commits if operation == "WRITE"]
    compactions = [files for operation, files in commits if operation == "OPTIMIZE"]
    print(
        f"bronze/events files after 1, 50, 100, 150, 200 batches: "
        f"{[writes[n - 1] for n in (1, 50, 100, 150, 200)]}; "
        f"at most {max(writes)}; {len(compactions)} auto-compactions"
    )
    assert len(writes) == BATCHES
    assert max(writes) <= MIN_NUM_FILES  # without auto-compaction: 200
    assert len(compactions) >= BATCHES // MIN_NUM_FILES - 1
    assert spark.read.format("delta").load(bronze.path).count() == BATCHES
