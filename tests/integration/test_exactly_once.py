"""A stream's writes happen once per batch without Delta's transaction lookups: a batch that
follows one its query completed writes straight away; any other batch first looks for its tag
in the table's log (medallion/streams/exactly_once.py)."""

from __future__ import annotations

import json
import time

import pytest

from medallion.delta_log import commit_actions, commit_tags, committed_version
from medallion.sql_names import TableRef
from medallion.streams import exactly_once as exactly_once_module
from medallion.streams.exactly_once import (
    CLOCK_SKEW_MS,
    BatchTag,
    BatchWrites,
    ReplayGuard,
    UnknownBatchWrites,
    written_in_history,
    written_in_log,
)
from medallion.streams.sinks import append_batch
from medallion.tables import history, read_table

APP = "medallion:test_stream:query-1"


def _table(spark, tmp_path) -> TableRef:
    table = TableRef("silver", "rows", str(tmp_path / "rows"), "medallion.scratch_rows")
    spark.createDataFrame([], "id bigint").write.format("delta").save(table.path)
    return table


def _rows(spark, n: int = 2):
    return spark.range(n).selectExpr("id")


def _offsets(checkpoint, batch_id: int, planned_ms: int) -> None:
    """The offsets file Spark writes when it plans a batch (only its metadata line matters)."""
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    metadata = {"batchWatermarkMs": 0, "batchTimestampMs": planned_ms, "conf": {}}
    (checkpoint / "offsets" / str(batch_id)).write_text(f"v1\n{json.dumps(metadata)}\n{{}}")


def test_a_batch_after_a_completed_one_writes_at_once_and_a_replay_skips_what_committed(
    spark, tmp_path
):
    table = _table(spark, tmp_path)
    guard = ReplayGuard()
    for batch_id, expected_replay in ((0, True), (1, False), (2, False)):
        with guard.batch(spark, batch_id) as writes:
            assert writes.replay is expected_replay
            assert writes.append(_rows(spark), table, APP)
    # Each commit carries its batch's tag, and no txn action: Delta looked nothing up.
    latest = committed_version(spark, table)
    actions = commit_actions(spark, table, latest)
    assert commit_tags(actions) == {APP: 2} and not any("txn" in a for a in actions)

    # A new process (a new guard) runs batch 2 again, then batch 3: the first is a possible
    # replay, found in the log and skipped; the next is new.
    again = ReplayGuard()
    with again.batch(spark, 2) as writes:
        assert writes.replay and not writes.append(_rows(spark), table, APP)
    with again.batch(spark, 3) as writes:
        assert not writes.replay and writes.append(_rows(spark), table, APP)
    assert read_table(spark, table).count() == 8

    # A batch that failed part-way is a possible replay when it runs again in the same query.
    with pytest.raises(RuntimeError), again.batch(spark, 4) as writes:
        writes.append(_rows(spark), table, APP)
        raise RuntimeError("the batch failed after its first write")
    with again.batch(spark, 4) as writes:
        assert writes.replay and not writes.append(_rows(spark), table, APP)
    assert read_table(spark, table).count() == 10


def test_a_replay_recognises_delta_txn_tags_and_stops_at_the_streams_earlier_batch(spark, tmp_path):
    table = _table(spark, tmp_path)
    # Written by older medallion versions or Delta's streaming sink: a txn action, batch 5.
    append_batch(_rows(spark), table, txn=(APP, 5))
    assert written_in_log(spark, table, BatchTag(APP, 5), None)
    assert written_in_log(spark, table, BatchTag(APP, 4), None)  # older batches: done
    assert not written_in_log(spark, table, BatchTag(APP, 6), None)
    # Another writer's commits after it do not hide it; another stream's tag is not ours.
    append_batch(_rows(spark), table, user_metadata=BatchTag("other", 9).user_metadata())
    append_batch(_rows(spark), table)
    assert written_in_log(spark, table, BatchTag(APP, 5), None)
    assert not written_in_log(spark, table, BatchTag("medallion:another:query", 0), None)
    # DESCRIBE HISTORY (tables whose log is not read from here) sees the userMetadata tags.
    assert written_in_history(spark, table, BatchTag("other", 9), None)
    assert not written_in_history(spark, table, BatchTag("other", 10), None)


def test_commits_older_than_the_batchs_plan_end_the_search_and_a_cleaned_log_is_refused(
    spark, tmp_path
):
    table = _table(spark, tmp_path)
    for _ in range(2):
        append_batch(_rows(spark), table)  # another writer's commits, untagged
    log_dir = tmp_path / "rows" / "_delta_log"
    (log_dir / f"{0:020d}.json").unlink()  # as the log's clean-up removes old commits
    tag = BatchTag(APP, 7)
    with pytest.raises(UnknownBatchWrites, match="cleaned up"):
        written_in_log(spark, table, tag, None)
    # Planned after those commits were made (beyond the clock margin): they cannot hold the
    # batch's writes, and the search ends there.
    checkpoint = tmp_path / "checkpoint"
    _offsets(checkpoint, 7, int(time.time() * 1000) + CLOCK_SKEW_MS + 60_000)
    writes = BatchWrites(spark, 7, replay=True, checkpoint=str(checkpoint))
    assert not writes.written_before(table, APP)
    # Planned before them: the batch may have written any of them, so it cannot tell.
    _offsets(checkpoint, 7, int(time.time() * 1000) - 3_600_000)
    with pytest.raises(UnknownBatchWrites):
        BatchWrites(spark, 7, replay=True, checkpoint=str(checkpoint)).written_before(table, APP)


def test_a_merge_is_tagged_and_skipped_when_replayed(spark, tmp_path):
    table = _table(spark, tmp_path)
    rows = spark.range(3).selectExpr("id")
    clauses = "WHEN NOT MATCHED THEN INSERT *"
    with ReplayGuard().batch(spark, 0) as writes:
        assert writes.merge(table, rows, ["id"], clauses, APP)
    assert commit_tags(commit_actions(spark, table, committed_version(spark, table))) == {APP: 0}
    assert spark.conf.get("spark.databricks.delta.commitInfo.userMetadata", None) is None
    with ReplayGuard().batch(spark, 0) as writes:
        assert not writes.merge(table, rows.selectExpr("id + 10 AS id"), ["id"], clauses, APP)
    assert read_table(spark, table).count() == 3


def test_a_merge_into_a_table_without_rows_appends_what_it_would_insert(spark, tmp_path):
    table = _table(spark, tmp_path)
    clauses = "WHEN MATCHED THEN UPDATE SET t.id = s.id WHEN NOT MATCHED AND s.id > 0 THEN INSERT *"
    rows = spark.range(4).selectExpr("id")
    with ReplayGuard().batch(spark, 0) as writes:
        assert writes.merge(table, rows, ["id"], clauses, APP, into_empty=rows.where("id > 0"))
    first = history(spark, table).orderBy("version").collect()[-1]
    assert first.operation == "WRITE"  # one append, not a MERGE's jobs
    assert commit_tags(commit_actions(spark, table, first.version)) == {APP: 0}
    with ReplayGuard().batch(spark, 0) as writes:  # a replay: written before, so skipped
        assert not writes.merge(table, rows, ["id"], clauses, APP, into_empty=rows)
    with ReplayGuard().batch(spark, 1) as writes:  # the table holds rows now: a MERGE
        more = spark.range(2, 6).selectExpr("id")
        assert writes.merge(table, more, ["id"], clauses, APP, into_empty=more)
    last = history(spark, table).orderBy("version").collect()[-1]
    assert last.operation == "MERGE"
    assert sorted(r.id for r in read_table(spark, table).collect()) == [1, 2, 3, 4, 5]


def test_a_table_found_holding_files_is_not_looked_at_again_by_the_query(
    spark, tmp_path, monkeypatch
):
    table = _table(spark, tmp_path)
    append_batch(_rows(spark), table)
    looked = []
    real = exactly_once_module.holds_no_files
    monkeypatch.setattr(
        exactly_once_module, "holds_no_files", lambda s, t: looked.append(t.key) or real(s, t)
    )
    guard = ReplayGuard()
    for batch in range(3):
        rows = spark.range(batch, batch + 3).selectExpr("id")
        with guard.batch(spark, batch) as writes:
            writes.merge(
                table, rows, ["id"], "WHEN NOT MATCHED THEN INSERT *", APP, into_empty=rows
            )
    assert looked == [table.key]  # one look at its log, then MERGEs
    assert sorted(r.id for r in read_table(spark, table).collect()) == [0, 1, 2, 3, 4]
