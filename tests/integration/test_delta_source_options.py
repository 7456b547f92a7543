"""Delta streaming source options, each shown on tiny tables through ``delta_stream``.

Streams are ``availableNow`` runs to completion (one test also runs a short processing-time
stream). Rows are collected per micro-batch by a ``foreachBatch`` sink, so the tests see both
what was read and how it was split.
See docs/delta-streaming.md for what each option is for.
"""

from __future__ import annotations

import shutil
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from pyspark.errors import AnalysisException, StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.source_options import DeltaSourceOptions
from medallion.sql_names import TableRef
from medallion.streams.sinks import merge_insert_new, merge_upsert
from medallion.streams.sources import (
    FIRST_VERSION_READ_LIMIT,
    delta_source_options,
    delta_stream,
    replays_as_snapshot,
)

pytestmark = pytest.mark.slow  # left out of make test-fast (docs/testing.md)

ROWS = "id BIGINT, value STRING"
TIMEOUT = 180
# Every option off, so a test turns on just the one it shows (the project's default skips
# change commits).
PLAIN = DeltaSourceOptions(skip_change_commits=False)


def _table(tmp_path: Path, name: str) -> TableRef:
    return TableRef("test", name, str(tmp_path / name), f"test.{name}")


def _append(spark: SparkSession, table: TableRef, rows: list[tuple], files: int = 1) -> int:
    """Append ``rows`` as one commit of ``files`` files; return the new table version."""
    # parallelize splits the rows evenly: ``files`` rows give ``files`` one-row files.
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, files), ROWS)
    df.write.format("delta").mode("append").save(table.path)
    return _version(spark, table)


def _version(spark: SparkSession, table: TableRef) -> int:
    return spark.sql(f"DESCRIBE HISTORY {table.sql_name} LIMIT 1").first().version


def _commit_time(spark: SparkSession, table: TableRef, version: int) -> datetime:
    history = spark.sql(f"DESCRIBE HISTORY {table.sql_name}")
    return history.where(F.col("version") == version).first().timestamp


def _run(query) -> None:
    """Wait for an ``availableNow`` query; a failed query raises StreamingQueryException."""
    try:
        assert query.awaitTermination(TIMEOUT), "the availableNow stream did not finish"
    finally:
        query.stop()


def _drain(df: DataFrame, checkpoint: Path, output_mode: str = "append") -> list[list[tuple]]:
    """Run ``df`` to the end of its input; return the rows of each non-empty micro-batch."""
    batches: list[list[tuple]] = []

    def collect(batch: DataFrame, _batch_id: int) -> None:
        rows = sorted(tuple(row) for row in batch.collect())
        if rows:
            batches.append(rows)

    query = (
        df.writeStream.foreachBatch(collect)
        .outputMode(output_mode)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    _run(query)
    return batches


def _read(
    spark: SparkSession, table: TableRef, options: DeltaSourceOptions, checkpoint: Path
) -> list[list[tuple]]:
    return _drain(delta_stream(spark, table, options), checkpoint)


def _ids(batches: list[list[tuple]]) -> list[int]:
    return sorted(row[0] for batch in batches for row in batch)


# --- startingVersion / startingTimestamp ---------------------------------------------------


def test_starting_version_starts_a_new_stream_at_that_version(spark, tmp_path):
    table = _table(tmp_path, "src")
    _append(spark, table, [(1, "v0"), (2, "v0")])
    v1 = _append(spark, table, [(3, "v1")])
    _append(spark, table, [(4, "v2")])

    from_v1 = _read(spark, table, DeltaSourceOptions(starting_version=v1), tmp_path / "cp_v1")
    assert _ids(from_v1) == [3, 4]  # version 0's rows are not read: no initial snapshot
    # Without the option a new stream reads the whole table (its current snapshot) first.
    assert _ids(_read(spark, table, PLAIN, tmp_path / "cp_all")) == [1, 2, 3, 4]


def _first_read(spark: SparkSession, table: TableRef, checkpoint: Path) -> tuple[list[int], bool]:
    """What a new stream of medallion's (given its checkpoint) reads of ``table``, and whether
    it reads it from version 0 rather than from its snapshot."""
    options = delta_source_options(spark, table, PLAIN, checkpoint=str(checkpoint))
    source = delta_stream(spark, table, PLAIN, checkpoint=str(checkpoint))
    return _ids(_drain(source, checkpoint)), options.get("startingVersion") == "0"


def test_a_new_stream_reads_a_young_append_only_source_from_its_first_commit(spark, tmp_path):
    table = _table(tmp_path, "src")
    _append(spark, table, [(1, "v0"), (2, "v0")], files=2)
    _append(spark, table, [(3, "v1")])
    _append(spark, table, [(4, "v2"), (5, "v2")], files=2)
    assert replays_as_snapshot(spark, table)
    # Read from version 0 (no initial snapshot, so no state rebuild): the snapshot's rows.
    assert _first_read(spark, table, tmp_path / "cp") == ([1, 2, 3, 4, 5], True)
    # A configured starting point, or a change feed, is left as it is.
    configured = DeltaSourceOptions(starting_version=1, skip_change_commits=False)
    assert (
        delta_source_options(spark, table, configured, checkpoint=str(tmp_path / "new"))[
            "startingVersion"
        ]
        == "1"
    )
    feed = delta_source_options(spark, table, PLAIN, change_feed=True, checkpoint="unused")
    assert "startingVersion" not in feed
    # A checkpoint with a position resumes from it, with no option added.
    _append(spark, table, [(6, "v3")])
    assert _first_read(spark, table, tmp_path / "cp") == ([6], False)


def _executions(spark: SparkSession):
    """The SQL executions Spark's status store holds, once its listener has seen every event
    posted so far (the listener bus is asynchronous)."""
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    return spark._jsparkSession.sharedState().statusStore().executionsList()


def _snapshot_reads_after(spark: SparkSession, execution: int) -> int:
    """How many SQL executions after ``execution`` scanned a Delta source's snapshot."""
    executions = _executions(spark)
    found = (executions.apply(i) for i in range(executions.size()))
    return sum(
        1
        for e in found
        if e.executionId() > execution and "Delta Source Snapshot" in e.physicalPlanDescription()
    )


def _last_execution(spark: SparkSession) -> int:
    executions = _executions(spark)
    return max((executions.apply(i).executionId() for i in range(executions.size())), default=-1)


def test_a_restart_after_the_first_batch_reads_no_snapshot_and_loses_nothing(spark, tmp_path):
    table = _table(tmp_path, "src")
    _append(spark, table, [(1, "a"), (2, "b")], files=2)
    spark.sql(f"DELETE FROM {table.sql_name} WHERE id = 2")  # so the first batch is a snapshot
    appended = _append(spark, table, [(3, "c")])
    checkpoint = tmp_path / "cp"
    assert _first_read(spark, table, checkpoint) == ([1, 3], False)
    _append(spark, table, [(4, "d")])
    shutil.copytree(checkpoint, tmp_path / "cp_plain")
    shutil.copytree(checkpoint, tmp_path / "cp_planned")

    # Spark hands a restarted source its last batch again; after the first batch, Delta
    # rebuilds that batch from the snapshot, unless a starting version says where it began.
    options = delta_source_options(spark, table, PLAIN, checkpoint=str(checkpoint))
    assert options["startingVersion"] == str(appended)
    before = _last_execution(spark)
    restarted = _drain(delta_stream(spark, table, PLAIN, checkpoint=str(checkpoint)), checkpoint)
    assert _ids(restarted) == [4]
    assert _snapshot_reads_after(spark, before) == 0
    before = _last_execution(spark)
    assert _ids(_read(spark, table, PLAIN, tmp_path / "cp_plain")) == [4]  # Delta's own restart
    assert _snapshot_reads_after(spark, before) > 0
    # Two batches committed: Spark hands the second one's range, which has a start.
    assert "startingVersion" not in delta_source_options(
        spark, table, PLAIN, checkpoint=str(checkpoint)
    )

    # A first batch planned but not committed is read again, whole: no starting version.
    planned = tmp_path / "cp_planned"
    (planned / "commits" / "0").unlink()
    assert "startingVersion" not in delta_source_options(
        spark, table, PLAIN, checkpoint=str(planned)
    )
    assert _ids(_drain(delta_stream(spark, table, PLAIN, checkpoint=str(planned)), planned)) == [
        1,
        3,
        4,
    ]


def test_a_restart_whose_first_batch_ended_on_a_delete_is_left_to_delta(spark, tmp_path):
    table = _table(tmp_path, "src")
    _append(spark, table, [(1, "a"), (2, "b")], files=2)
    spark.sql(f"DELETE FROM {table.sql_name} WHERE id = 2")
    checkpoint = tmp_path / "cp"
    assert _first_read(spark, table, checkpoint) == ([1], False)
    _append(spark, table, [(3, "c")])
    # Read as a change, the delete would stop a stream that does not skip change commits.
    assert "startingVersion" not in delta_source_options(
        spark, table, PLAIN, checkpoint=str(checkpoint)
    )
    restarted = _drain(delta_stream(spark, table, PLAIN, checkpoint=str(checkpoint)), checkpoint)
    assert _ids(restarted) == [3]


@pytest.mark.parametrize("change", ["delete", "optimize", "add column", "many commits"])
def test_a_source_that_lost_rows_or_changed_shape_is_read_from_its_snapshot(
    spark, tmp_path, change
):
    table = _table(tmp_path, "src")
    _append(spark, table, [(1, "a"), (2, "b")], files=2)
    _append(spark, table, [(3, "c")])
    if change == "delete":
        spark.sql(f"DELETE FROM {table.sql_name} WHERE id = 2")
    elif change == "optimize":
        spark.sql(f"OPTIMIZE {table.sql_name}")
    elif change == "add column":
        spark.sql(f"ALTER TABLE {table.sql_name} ADD COLUMNS (note STRING)")
    else:
        for i in range(FIRST_VERSION_READ_LIMIT):
            _append(spark, table, [(10 + i, "more")])
    assert not replays_as_snapshot(spark, table)
    expected = sorted(row.id for row in spark.read.format("delta").load(table.path).collect())
    assert _first_read(spark, table, tmp_path / "cp") == (expected, False)
    if change == "delete":
        assert 2 not in expected  # read from version 0, the deleted row would come back


def test_starting_version_latest_reads_only_commits_made_while_the_stream_runs(spark, tmp_path):
    table = _table(tmp_path, "src")
    _append(spark, table, [(1, "v0")])
    latest = DeltaSourceOptions(starting_version="latest")

    # An availableNow run ends at the version that was latest when it started, so with
    # "latest" it reads nothing and records no position: the next run starts at the then
    # latest version again and the commits made in between are never read.
    checkpoint = tmp_path / "cp_available_now"
    assert _read(spark, table, latest, checkpoint) == []
    _append(spark, table, [(2, "v1")])
    assert _read(spark, table, latest, checkpoint) == []
    offsets = checkpoint / "offsets"
    assert not offsets.exists() or not any(offsets.iterdir())

    # A running stream (processingTime) reads what is committed after its first trigger.
    batches: list[list[tuple]] = []

    def collect(batch: DataFrame, _batch_id: int) -> None:
        rows = sorted(tuple(row) for row in batch.collect())
        if rows:
            batches.append(rows)

    query = (
        delta_stream(spark, table, latest)
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "cp_running"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        _wait(lambda: query.status["message"] == "Waiting for data to arrive", query)
        _append(spark, table, [(3, "v2")])
        _wait(lambda: bool(batches), query)
    finally:
        query.stop()
    assert batches == [[(3, "v2")]]


def _wait(condition, query, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if query.exception() is not None:
            raise query.exception()
        assert time.monotonic() < deadline, f"timed out; status {query.status}"
        time.sleep(0.2)


def test_starting_timestamp_starts_at_the_first_commit_at_or_after_it(spark, tmp_path):
    table = _table(tmp_path, "src")
    v0 = _append(spark, table, [(1, "v0"), (2, "v0")])
    time.sleep(0.3)  # commit timestamps have millisecond precision: keep v0 and v1 apart
    v1 = _append(spark, table, [(3, "v1")])
    _append(spark, table, [(4, "v2")])
    t0, t1 = _commit_time(spark, table, v0), _commit_time(spark, table, v1)
    assert t1 - t0 >= timedelta(milliseconds=200)

    between = t0 + (t1 - t0) / 2  # after version 0, before version 1
    options = DeltaSourceOptions(starting_timestamp=between.isoformat(timespec="milliseconds"))
    assert _ids(_read(spark, table, options, tmp_path / "cp")) == [3, 4]


# --- maxFilesPerTrigger / maxBytesPerTrigger -------------------------------------------------


def test_max_files_and_max_bytes_per_trigger_split_the_input_into_micro_batches(spark, tmp_path):
    table = _table(tmp_path, "src")
    # One commit of four files (one row each) and one of two: six files.
    _append(spark, table, [(i, "a") for i in range(4)], files=4)
    _append(spark, table, [(i, "b") for i in range(4, 6)], files=2)
    files = spark.sql(f"DESCRIBE DETAIL {table.sql_name}").first().numFiles
    assert files == 6

    def batch_sizes(options: DeltaSourceOptions, name: str) -> list[int]:
        batches = _read(spark, table, options, tmp_path / name)
        assert _ids(batches) == list(range(6))  # every row exactly once, however it is split
        return [len(batch) for batch in batches]

    # availableNow honours the rate limits (Trigger.Once would take everything in one batch).
    assert batch_sizes(PLAIN, "cp_default") == [6]  # the default limit is 1000 files
    one_file = DeltaSourceOptions(max_files_per_trigger=1, skip_change_commits=False)
    assert batch_sizes(one_file, "cp_one_file") == [1] * 6  # within a commit, too
    four_files = DeltaSourceOptions(max_files_per_trigger=4, skip_change_commits=False)
    assert batch_sizes(four_files, "cp_four_files") == [4, 2]
    # A soft limit: a batch takes files until it reaches the size, and at least one file.
    one_byte = DeltaSourceOptions(max_bytes_per_trigger="1b", skip_change_commits=False)
    assert batch_sizes(one_byte, "cp_one_byte") == [1] * 6


# --- skipChangeCommits -----------------------------------------------------------------------


def _update(spark: SparkSession, table: TableRef) -> None:
    spark.sql(f"UPDATE {table.sql_name} SET value = 'updated' WHERE id = 1")


def _delete(spark: SparkSession, table: TableRef) -> None:
    spark.sql(f"DELETE FROM {table.sql_name} WHERE id = 1")


def _merge_upsert(spark: SparkSession, table: TableRef) -> None:
    rows = spark.createDataFrame([(1, "merged"), (9, "merged")], ROWS)
    merge_upsert(spark, table, rows, ["id"])


@pytest.mark.parametrize(
    "change", [_update, _delete, _merge_upsert], ids=["update", "delete", "merge"]
)
def test_skip_change_commits_skips_rewrites_that_otherwise_fail_the_stream(spark, tmp_path, change):
    table = _table(tmp_path, "src")
    _append(spark, table, [(1, "a"), (2, "a"), (3, "a")])
    skipping = DeltaSourceOptions(skip_change_commits=True)
    assert _ids(_read(spark, table, skipping, tmp_path / "cp_skip")) == [1, 2, 3]
    assert _ids(_read(spark, table, PLAIN, tmp_path / "cp_plain")) == [1, 2, 3]

    change(spark, table)  # rewrites the file holding id 1 (remove + add, dataChange=true)
    _append(spark, table, [(4, "a")])

    # With the option the rewrite's commit is skipped whole: none of the rows it rewrote (the
    # changed row and the unchanged copies of 2 and 3) is emitted; the later append is.
    assert _read(spark, table, skipping, tmp_path / "cp_skip") == [[(4, "a")]]
    # Without it the source refuses a commit that is not an append.
    with pytest.raises(
        StreamingQueryException, match="DELTA_SOURCE_TABLE_IGNORE_CHANGES.*skipChangeCommits"
    ):
        _read(spark, table, PLAIN, tmp_path / "cp_plain")


def test_compaction_and_insert_only_merge_are_appends_for_a_stream(spark, tmp_path):
    """What the option is not needed for: OPTIMIZE (dataChange=false) and insert-only MERGE."""
    table = _table(tmp_path, "src")
    _append(spark, table, [(1, "a")])
    _append(spark, table, [(2, "a")])
    assert _ids(_read(spark, table, PLAIN, tmp_path / "cp")) == [1, 2]

    spark.sql(f"OPTIMIZE {table.sql_name}")  # rewrites both files into one
    assert spark.sql(f"DESCRIBE DETAIL {table.sql_name}").first().numFiles == 1
    rows = spark.createDataFrame([(2, "dup"), (3, "new")], ROWS)
    merge_insert_new(spark, table, rows, ["id"])

    assert _read(spark, table, PLAIN, tmp_path / "cp") == [[(3, "new")]]


# --- withEventTimeOrder ----------------------------------------------------------------------

EVENTS = "id BIGINT, event_time TIMESTAMP"


def _late_snapshot_table(spark: SparkSession, tmp_path: Path) -> TableRef:
    """Three one-file commits; the last holds the earliest event times."""
    table = _table(tmp_path, "events")
    for hour, ids in ((12, (1, 2, 3)), (13, (4, 5, 6)), (10, (7, 8, 9))):
        rows = [(i, datetime(2026, 11, 20, hour, i)) for i in ids]
        spark.createDataFrame(rows, EVENTS).coalesce(1).write.format("delta").mode("append").save(
            table.path
        )
        time.sleep(0.1)  # the initial snapshot is ordered by file modification time
    return table


def _counted_by_windowed_aggregation(
    spark: SparkSession, table: TableRef, options: DeltaSourceOptions, checkpoint: Path
) -> int:
    """How many rows a watermarked hourly count (update mode) counted in the end."""
    counts = (
        delta_stream(spark, table, options)
        .withWatermark("event_time", "10 minutes")
        # Group by the window itself: it carries the watermark (its .start would not).
        .groupBy(F.window("event_time", "1 hour"))
        .count()
        .select(F.col("window.start"), "count")
    )
    latest: dict[datetime, int] = {}
    for batch in _drain(counts, checkpoint, "update"):
        latest.update(dict(batch))  # update mode emits a window's new total when it changes
    return sum(latest.values())


def test_initial_snapshot_in_file_order_drops_rows_behind_the_watermark(spark, tmp_path):
    table = _late_snapshot_table(spark, tmp_path)
    one_file = DeltaSourceOptions(max_files_per_trigger=1, skip_change_commits=False)
    # One file per batch, in commit order: 12:xx, 13:xx, then 10:xx. By the third batch the
    # watermark (max event time - 10 minutes) has passed 10:xx and those three rows are dropped.
    assert _counted_by_windowed_aggregation(spark, table, one_file, tmp_path / "cp_split") == 6
    # The snapshot read in one batch drops nothing: the watermark moves only between batches.
    assert _counted_by_windowed_aggregation(spark, table, PLAIN, tmp_path / "cp_whole") == 9


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="withEventTimeOrder is a Databricks Runtime option: open-source delta-spark 4.4.0 "
    "does not know it and silently ignores it (see docs/delta-streaming.md)",
)
def test_with_event_time_order_processes_the_initial_snapshot_without_drops(spark, tmp_path):
    table = _late_snapshot_table(spark, tmp_path)
    ordered = DeltaSourceOptions(
        max_files_per_trigger=1, with_event_time_order=True, skip_change_commits=False
    )
    assert _counted_by_windowed_aggregation(spark, table, ordered, tmp_path / "cp") == 9


# --- mergeSchema on streaming writes ---------------------------------------------------------


def _stream_into(df: DataFrame, target: TableRef, checkpoint: Path, **options: str) -> None:
    writer = df.writeStream.format("delta").outputMode("append")
    writer = writer.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
    for key, value in options.items():
        writer = writer.option(key, value)
    _run(writer.start(target.path))


def test_merge_schema_lets_a_stream_add_a_column_to_its_target(spark, tmp_path):
    target = _table(tmp_path, "target")
    _append(spark, target, [(1, "old")])
    source = _table(tmp_path, "source")
    spark.createDataFrame([(2, "new", "x")], f"{ROWS}, extra STRING").write.format("delta").save(
        source.path
    )

    with pytest.raises((StreamingQueryException, AnalysisException), match="schema mismatch"):
        _stream_into(delta_stream(spark, source, PLAIN), target, tmp_path / "cp_strict")
    assert spark.read.format("delta").load(target.path).columns == ["id", "value"]

    widened = delta_stream(spark, source, PLAIN)
    _stream_into(widened, target, tmp_path / "cp_merge", mergeSchema="true")
    rows = spark.read.format("delta").load(target.path).orderBy("id").collect()
    assert [tuple(r) for r in rows] == [(1, "old", None), (2, "new", "x")]


# --- append vs complete vs update-via-MERGE --------------------------------------------------


def _last_commit(spark: SparkSession, table: TableRef):
    return spark.sql(f"DESCRIBE HISTORY {table.sql_name} LIMIT 1").first()


def _rows(spark: SparkSession, table: TableRef) -> list[tuple]:
    return sorted(tuple(r) for r in spark.read.format("delta").load(table.path).collect())


def test_append_complete_and_update_via_merge_outputs(spark, tmp_path):
    source = _table(tmp_path, "sales")
    _append(spark, source, [(1, "a"), (2, "b"), (3, "a")])
    appended, complete, merged = (_table(tmp_path, n) for n in ("appended", "complete", "merged"))
    spark.sql(f"CREATE TABLE {merged.sql_name} (value STRING, n BIGINT) USING delta")

    def counts() -> DataFrame:
        return delta_stream(spark, source, PLAIN).groupBy("value").agg(F.count("*").alias("n"))

    def upsert(batch: DataFrame, _batch_id: int) -> None:
        merge_upsert(batch.sparkSession, merged, batch, ["value"])

    def run_all() -> None:
        # append: every source row once, new rows added; aggregates need a watermark here.
        _stream_into(delta_stream(spark, source, PLAIN), appended, tmp_path / "cp_append")
        # complete: the whole aggregate is recomputed and overwrites the table every batch.
        query = (
            counts()
            .writeStream.format("delta")
            .outputMode("complete")
            .option("checkpointLocation", str(tmp_path / "cp_complete"))
            .trigger(availableNow=True)
            .start(complete.path)
        )
        _run(query)
        # update: only the groups a batch changed, upserted by MERGE in foreachBatch.
        query = (
            counts()
            .writeStream.outputMode("update")
            .foreachBatch(upsert)
            .option("checkpointLocation", str(tmp_path / "cp_merge"))
            .trigger(availableNow=True)
            .start()
        )
        _run(query)

    run_all()
    assert _rows(spark, appended) == [(1, "a"), (2, "b"), (3, "a")]
    assert _rows(spark, complete) == _rows(spark, merged) == [("a", 2), ("b", 1)]

    _append(spark, source, [(4, "b"), (5, "c")])
    run_all()
    assert _rows(spark, appended) == [(1, "a"), (2, "b"), (3, "a"), (4, "b"), (5, "c")]
    assert _rows(spark, complete) == _rows(spark, merged) == [("a", 2), ("b", 2), ("c", 1)]
    # Same final rows, different work: complete rewrote every group, MERGE only b and c.
    rewrite = _last_commit(spark, complete)
    assert rewrite.operationParameters["outputMode"] == "Complete"
    assert rewrite.operationMetrics["numOutputRows"] == "3"
    merge = _last_commit(spark, merged)
    assert merge.operation == "MERGE"
    assert merge.operationMetrics["numTargetRowsUpdated"] == "1"
    assert merge.operationMetrics["numTargetRowsInserted"] == "1"

    # The Delta sink itself takes append and complete only: update needs foreachBatch + MERGE.
    with pytest.raises(
        (StreamingQueryException, AnalysisException),
        match="(?i)does not support update output mode",
    ):
        query = (
            counts()
            .writeStream.format("delta")
            .outputMode("update")
            .option("checkpointLocation", str(tmp_path / "cp_update"))
            .trigger(availableNow=True)
            .start(str(tmp_path / "update_sink"))
        )
        _run(query)
