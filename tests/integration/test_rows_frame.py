"""Plain rows become a DataFrame in the JVM (``tables.rows_frame``), every type of the logs'
schemas intact, and a value that does not fit its column is an error, never a null."""

from __future__ import annotations

import math
from datetime import datetime, timezone

import pytest

from medallion.streams.progress import PROGRESS_SCHEMA
from medallion.tables import rows_frame

ROW = {
    "query_name": "bronze_events",
    "query_id": "q",
    "run_id": "r",
    "batch_id": 7,
    "timestamp": datetime(2026, 12, 6, 5, 29, 21, 207616, tzinfo=timezone.utc),
    "num_input_rows": 5,
    "input_rows_per_second": math.nan,
    "processed_rows_per_second": 2.5,
    "duration_ms": {"addBatch": 3, "triggerExecution": 4},
    "sources": [
        {
            "description": "a 'quoted' \"source\"",
            "start_offset": None,
            "end_offset": '{"reservoirVersion": 2}',
            "latest_offset": None,
            "num_input_rows": 5,
            "input_rows_per_second": None,
            "processed_rows_per_second": 0.5,
        }
    ],
    "sink_description": "ForeachBatchSink \u00e9",
    "sink_num_output_rows": None,
    "progress_json": '{"x": "\\u00e9\\n"}',
}


def test_rows_keep_their_values_in_one_partition(spark):
    frame = rows_frame(spark, [ROW, {**ROW, "batch_id": 8}], PROGRESS_SCHEMA)
    assert frame.rdd.getNumPartitions() == 1
    first, second = frame.collect()
    got = first.asDict(recursive=True)
    assert math.isnan(got.pop("input_rows_per_second"))
    expected = {k: v for k, v in ROW.items() if k != "input_rows_per_second"}
    # Spark hands timestamps back in the session's zone, without it.
    assert got.pop("timestamp").replace(tzinfo=timezone.utc) == expected.pop("timestamp")
    assert got == expected
    assert second.batch_id == 8


def test_a_value_that_does_not_fit_its_column_fails(spark):
    with pytest.raises(Exception, match="MALFORMED_RECORD"):  # naming batch_id's value
        rows_frame(spark, [{**ROW, "batch_id": "seven"}], PROGRESS_SCHEMA).collect()
    with pytest.raises(TypeError, match="no JSON form"):
        rows_frame(spark, [{**ROW, "query_id": object()}], PROGRESS_SCHEMA)
