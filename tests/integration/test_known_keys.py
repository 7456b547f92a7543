"""A stream's key index kept in its checkpoint: read back by the next process only while the
table's log shows that its keys have not changed, and read from the table otherwise."""

from __future__ import annotations

import json
import logging
import shutil

import pytest

from medallion.delta_log import committed_version, holds_no_files
from medallion.sql_names import TableRef
from medallion.streams import known_keys
from medallion.streams.known_keys import KnownKeys, kept_keys
from medallion.streams.sinks import append_batch
from medallion.tables import read_table

APP = "medallion:test_stream:query"


def _table(spark, tmp_path, ids: range) -> TableRef:
    table = TableRef("silver", "keys", str(tmp_path / "keys"), "medallion.scratch_keys")
    spark.range(ids.start, ids.stop).selectExpr("concat('e', id) AS event_id").write.format(
        "delta"
    ).save(table.path)
    return table


def _batch(spark, ids: range):
    return spark.range(ids.start, ids.stop).selectExpr("concat('e', id) AS event_id").cache()


def _new_ids(spark, known: KnownKeys, ids: range) -> set[str]:
    unseen, _ = known.new_rows(spark, _batch(spark, ids))
    return {row.event_id for row in unseen.collect()}


def _write(spark, known: KnownKeys, table: TableRef, ids: range, batch: int) -> None:
    """What a stream does with a batch: append the keys the table lacks, then record them."""
    unseen, hashes = known.new_rows(spark, _batch(spark, ids))
    append_batch(unseen.select("event_id"), table, txn=(APP, batch))
    known.added(spark, hashes, (APP, batch))


def _manifest(folder) -> dict:
    return json.loads((folder / "index.json").read_text())


def test_the_next_process_reads_the_kept_index_while_the_keys_are_unchanged(
    spark, tmp_path, caplog
):
    table = _table(spark, tmp_path, range(0, 500))
    folder = tmp_path / "checkpoint" / "_medallion_keys" / "silver.keys"
    assert kept_keys(str(tmp_path / "checkpoint"), table) == str(folder)

    known = KnownKeys(table, ["event_id"], str(folder))
    assert _new_ids(spark, known, range(490, 510)) == {f"e{i}" for i in range(500, 510)}
    assert _manifest(folder)["version"] == 0
    for batch, ids in enumerate([range(490, 700), range(650, 800), range(0, 900)]):
        _write(spark, known, table, ids, batch)
    assert read_table(spark, table).count() == 900
    manifest = _manifest(folder)
    assert manifest["version"] == committed_version(spark, table) == 3
    assert sum(run["keys"] for run in manifest["runs"]) == 900
    assert sorted(p.name for p in folder.glob("*.npy")) == sorted(
        r["file"] for r in manifest["runs"]
    )

    # OPTIMIZE rewrites files without changing rows: the kept index still holds.
    spark.sql(f"OPTIMIZE delta.`{table.path}`")
    restarted = KnownKeys(table, ["event_id"], str(folder))
    assert restarted._store is not None
    kept = restarted._store.load(spark, table)
    assert kept is not None and kept[1] == committed_version(spark, table) == 4
    assert _new_ids(spark, restarted, range(850, 1000)) == {f"e{i}" for i in range(900, 1000)}

    # A damaged run file: the keys are read from the table instead, and kept again.
    first_run = folder / _manifest(folder)["runs"][0]["file"]
    first_run.write_bytes(b"not an index")
    with caplog.at_level(logging.DEBUG, logger="medallion"):
        damaged = KnownKeys(table, ["event_id"], str(folder))
        assert damaged._store.load(spark, table) is None
        assert _new_ids(spark, damaged, range(850, 1000)) == {f"e{i}" for i in range(900, 1000)}
    assert not first_run.exists()
    assert KnownKeys(table, ["event_id"], str(folder))._store.load(spark, table) is not None


def test_keys_that_another_writer_added_or_deleted_are_read_from_the_table(spark, tmp_path):
    table = _table(spark, tmp_path, range(0, 100))
    folder = tmp_path / "checkpoint" / "_medallion_keys" / "silver.keys"
    known = KnownKeys(table, ["event_id"], str(folder))
    _write(spark, known, table, range(100, 200), batch=0)

    # Another job appends e200..e209 while the stream runs: the stream's next write notices
    # it, and its next batch reads the keys again rather than take e200 for a new key.
    append_batch(_batch(spark, range(200, 210)), table)
    _write(spark, known, table, range(300, 310), batch=1)
    assert known._index is None
    assert _new_ids(spark, known, range(195, 215)) == {f"e{i}" for i in range(210, 215)}

    # A DELETE (here of e0..e9) after the stream stopped: the kept index is not used, and the
    # deleted keys are new again.
    _write(spark, known, table, range(210, 220), batch=2)
    assert KnownKeys(table, ["event_id"], str(folder))._store.load(spark, table) is not None
    spark.sql(
        f"DELETE FROM delta.`{table.path}` WHERE event_id IN {tuple(f'e{i}' for i in range(10))}"
    )
    restarted = KnownKeys(table, ["event_id"], str(folder))
    assert restarted._store.load(spark, table) is None
    assert _new_ids(spark, restarted, range(0, 12)) == {f"e{i}" for i in range(10)}

    # The same stream's own write that was never recorded (a crash right after the append):
    # the next process reads the table, which holds the write.
    crashed = KnownKeys(table, ["event_id"], str(folder))
    unseen, _ = crashed.new_rows(spark, _batch(spark, range(400, 410)))
    append_batch(unseen.select("event_id"), table, txn=(APP, 3))
    restarted = KnownKeys(table, ["event_id"], str(folder))
    assert restarted._store.load(spark, table) is None
    assert _new_ids(spark, restarted, range(405, 415)) == {f"e{i}" for i in range(410, 415)}


def test_a_replaced_table_is_not_taken_for_the_one_the_index_was_kept_for(spark, tmp_path):
    table = _table(spark, tmp_path, range(0, 50))
    folder = tmp_path / "checkpoint" / "_medallion_keys" / "silver.keys"
    known = KnownKeys(table, ["event_id"], str(folder))
    _write(spark, known, table, range(50, 60), batch=0)
    _write(spark, known, table, range(60, 70), batch=1)
    assert _manifest(folder)["version"] == 2

    # The folder is deleted and a new table written there, with as many versions as the
    # index's and one more that only compacts it: only the table's id tells them apart.
    shutil.rmtree(table.path)
    _table(spark, tmp_path, range(1000, 1001))
    for i in range(2):
        append_batch(_batch(spark, range(2000 + i, 2001 + i)), table)
    spark.sql(f"OPTIMIZE delta.`{table.path}`")
    assert committed_version(spark, table) == 3
    restarted = KnownKeys(table, ["event_id"], str(folder))
    assert restarted._store.load(spark, table) is None
    assert _new_ids(spark, restarted, range(0, 3)) == {"e0", "e1", "e2"}
    assert len(restarted._index) == 3


def test_a_table_larger_than_the_memory_bound_is_read_in_buckets_and_mapped(
    spark, tmp_path, monkeypatch
):
    # 2,000 keys read at 48 bytes each against a bound of 8 KiB: 16 buckets.
    monkeypatch.setenv("MEDALLION_KEY_INDEX_MEMORY_MB", str(8 / 1024))
    table = _table(spark, tmp_path, range(0, 2000))
    folder = tmp_path / "checkpoint" / "_medallion_keys" / "silver.keys"
    known = KnownKeys(table, ["event_id"], str(folder))
    assert _new_ids(spark, known, range(1990, 2010)) == {f"e{i}" for i in range(2000, 2010)}
    index = known._index
    assert index is not None and len(index) == 2000 and index.memory_held <= 8 * 1024
    assert [run.mapped for run in index.runs] == [True]
    assert not list(folder.glob("_read-*")), "the buckets' scratch folder is deleted"

    for batch, ids in enumerate([range(1990, 2600), range(2500, 3100), range(0, 3200)]):
        _write(spark, known, table, ids, batch)
        assert known._index is not None and known._index.memory_held <= 8 * 1024
    assert read_table(spark, table).count() == 3200

    restarted = KnownKeys(table, ["event_id"], str(folder))
    assert _new_ids(spark, restarted, range(3100, 3300)) == {f"e{i}" for i in range(3200, 3300)}
    assert restarted._index is not None and all(run.mapped for run in restarted._index.runs)


@pytest.mark.parametrize("broadcast_keys", [250_000, 0], ids=["broadcast", "shuffle"])
def test_a_batch_of_mostly_held_or_mostly_new_keys_gets_exactly_its_new_ones(
    spark, tmp_path, monkeypatch, broadcast_keys
):
    # The join is sent the smaller side (held keys to leave out, new ones to keep), as a
    # broadcast up to BROADCAST_KEYS keys and by a shuffle beyond.
    monkeypatch.setattr(known_keys, "BROADCAST_KEYS", broadcast_keys)
    table = _table(spark, tmp_path, range(0, 300))
    known = KnownKeys(table, ["event_id"], str(tmp_path / "keys"))
    assert _new_ids(spark, known, range(0, 310)) == {f"e{i}" for i in range(300, 310)}
    assert _new_ids(spark, known, range(295, 600)) == {f"e{i}" for i in range(300, 600)}
    assert _new_ids(spark, known, range(0, 300)) == set()


def test_new_rows_are_the_batch_itself_when_none_is_held_and_keep_its_columns(spark, tmp_path):
    """A batch none of whose keys the table holds is given back as it came, so that its own
    cache serves the write; otherwise the new rows have the batch's columns, no hash ones."""
    table = _table(spark, tmp_path, range(0, 10))
    known = KnownKeys(table, ["event_id"])
    fresh = _batch(spark, range(100, 110))
    unseen, hashes = known.new_rows(spark, fresh)
    assert unseen is fresh and len(hashes[0]) == 10

    mixed = _batch(spark, range(5, 15))
    unseen, hashes = known.new_rows(spark, mixed)
    assert unseen.columns == mixed.columns
    assert sorted(r.event_id for r in unseen.collect()) == sorted(f"e{i}" for i in range(10, 15))
    assert len(hashes[0]) == 5


def test_a_table_just_created_is_known_empty_from_its_log_without_reading_it(
    spark, tmp_path, monkeypatch
):
    table = TableRef("silver", "fresh", str(tmp_path / "fresh"), "medallion.scratch_fresh")
    spark.createDataFrame([], "event_id string").write.format("delta").save(table.path)
    assert holds_no_files(spark, table)

    def no_read(*args, **kwargs):
        raise AssertionError("the keys of a table without files were read")

    monkeypatch.setattr(known_keys, "read_table", no_read)
    known = KnownKeys(table, ["event_id"], str(tmp_path / "checkpoint" / "keys"))
    _write(spark, known, table, range(0, 50), batch=0)
    assert not holds_no_files(spark, table)
    assert _new_ids(spark, known, range(40, 60)) == {f"e{i}" for i in range(50, 60)}
