"""Files per table stay bounded over 200 micro-batch-sized commits (auto-compaction).

Each commit is one small INSERT into ``bronze/events`` as the pipeline creates it (its table
properties included), standing in for one micro-batch of the bronze stream: 200 real triggers
of every stream cost minutes more. benchmarks/small_files.py measures the MERGE-written
tables (the real ``foreachBatch`` functions) with and without the properties.
"""

from __future__ import annotations

import pytest

from medallion.tables import ensure_tables

BATCHES = 200
# Delta's auto compaction starts once this many small files accumulate (autoCompact.minNumFiles).
MIN_NUM_FILES = 50


@pytest.mark.slow
def test_files_per_table_stay_bounded_over_200_micro_batches(spark, config):
    ensure_tables(spark, config)
    bronze = config.table("bronze/events")

    def files() -> int:
        return int(spark.sql(f"DESCRIBE DETAIL {bronze.sql_name}").collect()[0].numFiles)

    counts = {}
    for batch in range(1, BATCHES + 1):
        spark.sql(
            f"INSERT INTO {bronze.sql_name} (event_id, _raw, _source_file, _ingested_at) "
            f"VALUES ('e{batch}', '{{}}', 'file:/landing/events/{batch}.json', now())"
        )
        if batch == 1 or batch % 10 == 0:
            counts[batch] = files()
    print(
        f"bronze/events files after 1, 50, 100, 200 batches: {[counts[n] for n in (1, 50, 100, 200)]}"
    )
    assert max(counts.values()) <= MIN_NUM_FILES
    assert counts[BATCHES] < MIN_NUM_FILES
    operations = [r.operation for r in spark.sql(f"DESCRIBE HISTORY {bronze.sql_name}").collect()]
    assert operations.count("OPTIMIZE") >= BATCHES // MIN_NUM_FILES - 1  # auto-compactions
    assert spark.read.format("delta").load(bronze.path).count() == BATCHES
