"""A new table's first commit written by medallion (medallion/first_commit.py) is the one
Delta's own CREATE TABLE writes, for every declared table, and Delta reads and writes on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from medallion import first_commit
from medallion.pipelines import all_tables
from medallion.sql_names import TableRef
from medallion.tables import create_delta_table

pytestmark = pytest.mark.usefixtures("spark")


def _table(path: Path) -> TableRef:
    """A path table named after its folder."""
    return TableRef(layer="silver", name=path.name, path=str(path), qualified_name=path.name)


def _log(path: Path) -> tuple[list[dict], dict]:
    log = path / "_delta_log"
    actions = [json.loads(line) for line in (log / f"{0:020d}.json").read_text().splitlines()]
    return actions, json.loads((log / f"{0:020d}.crc").read_text())


def _comparable(path: Path) -> dict:
    """Version 0 and its checksum without what differs between any two creations (ids, times,
    the engine's name) and with sets as sets."""
    actions, checksum = _log(path)
    by_kind = {kind: body for action in actions for kind, body in action.items()}
    info = by_kind["commitInfo"]
    parameters = dict(info["operationParameters"])
    parameters["properties"] = json.loads(parameters["properties"])

    def metadata(body: dict) -> dict:
        kept = {k: v for k, v in body.items() if k not in ("id", "createdTime")}
        return {**kept, "schemaString": json.loads(kept["schemaString"])}

    def protocol(body: dict) -> dict:
        return {k: sorted(v) if isinstance(v, list) else v for k, v in body.items()}

    assert checksum["metadata"] == by_kind["metaData"]
    assert checksum["txnId"] == info["txnId"]
    return {
        "kinds": sorted(by_kind),
        "commitInfo": {k: info[k] for k in ("operation", "isolationLevel", "isBlindAppend")},
        "operationParameters": parameters,
        "metaData": metadata(by_kind["metaData"]),
        "protocol": protocol(by_kind["protocol"]),
        "checksum": {
            **{k: v for k, v in checksum.items() if k not in ("txnId", "metadata", "protocol")},
            "protocol": protocol(checksum["protocol"]),
        },
    }


def _delta_creates(spark, path: Path, columns: str, properties: dict, partitioned_by=()) -> None:
    layout = f" PARTITIONED BY ({', '.join(partitioned_by)})" if partitioned_by else ""
    pairs = ", ".join(f"'{k}' = '{v}'" for k, v in properties.items())
    clause = f" TBLPROPERTIES ({pairs})" if pairs else ""
    spark.sql(f"CREATE TABLE delta.`{path}` ({columns}) USING DELTA{layout}{clause}")


def _medallion_creates(spark, path: Path, columns: str, properties: dict, partitioned_by=()):
    create_delta_table(spark, _table(path), columns, properties, partitioned_by)
    assert json.loads((path / "_delta_log" / f"{0:020d}.json").read_text().splitlines()[0])[
        "commitInfo"
    ]["engineInfo"].startswith("medallion/"), "Delta created the table, not medallion"


TABLES = sorted(all_tables().values(), key=lambda t: t.key)
EXTRA = [
    ("cdf_append_only", "id BIGINT NOT NULL, tags ARRAY<STRING>", {
        "delta.enableChangeDataFeed": "true", "delta.appendOnly": "true"}, ()),
    ("partitioned", "day DATE, n INT COMMENT 'how many', m MAP<STRING, DECIMAL(10,2)>", {}, ("day",)),
    ("nested", "s STRUCT<a: INT, b: ARRAY<STRUCT<c: TIMESTAMP>>>, f FLOAT, b BINARY", {
        "delta.checkpointInterval": "5"}, ()),
]  # fmt: skip


@pytest.mark.parametrize(
    "columns, properties, partitioned_by",
    [(t.schema, dict(t.properties), t.partitioned_by) for t in TABLES]
    + [case[1:] for case in EXTRA],
    ids=[t.key for t in TABLES] + [case[0] for case in EXTRA],
)
def test_the_first_commit_is_the_one_delta_writes(
    spark, tmp_path, columns, properties, partitioned_by
):
    _delta_creates(spark, tmp_path / "delta", columns, properties, partitioned_by)
    _medallion_creates(spark, tmp_path / "ours", columns, properties, partitioned_by)
    assert _comparable(tmp_path / "ours") == _comparable(tmp_path / "delta")


def test_delta_writes_reads_and_feeds_changes_of_a_table_medallion_created(spark, tmp_path):
    path = tmp_path / "t"
    properties = {"delta.enableChangeDataFeed": "true"}
    _medallion_creates(spark, path, "id BIGINT NOT NULL, name STRING", properties)
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (1, 'a'), (2, 'b')")
    spark.sql(f"UPDATE delta.`{path}` SET name = 'c' WHERE id = 2")
    assert sorted(spark.read.format("delta").load(str(path)).collect()) == [(1, "a"), (2, "c")]
    changes = (
        spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 0)
    )
    kinds = sorted(r._change_type for r in changes.load(str(path)).collect())
    assert kinds == ["insert", "insert", "update_postimage", "update_preimage"]
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()
    assert [r.operation for r in history] == ["CREATE TABLE", "WRITE", "UPDATE"]
    # Delta carried the checksum on from medallion's: each version has one, sizes added up.
    crc = json.loads((path / "_delta_log" / f"{2:020d}.crc").read_text())
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    assert (crc["numFiles"], crc["tableSizeBytes"]) == (detail.numFiles, detail.sizeInBytes)
    with pytest.raises(Exception, match="NOT NULL|null"):
        spark.sql(f"INSERT INTO delta.`{path}` VALUES (NULL, 'x')")


def test_a_table_that_needs_a_feature_is_left_to_delta():
    plain = {"type": "struct", "fields": [{"name": "a", "type": "long", "metadata": {}}]}
    assert first_commit.first_commit(plain, {}) is not None
    assert first_commit.first_commit(plain, {"delta.enableDeletionVectors": "true"}) is None
    for data_type in ("timestamp_ntz", "variant", "void"):
        typed = {"type": "struct", "fields": [{"name": "a", "type": data_type, "metadata": {}}]}
        assert first_commit.first_commit(typed, {}) is None, data_type
    defaulted = {"type": "struct", "fields": [
        {"name": "a", "type": "long", "metadata": {"CURRENT_DEFAULT": "1"}}]}  # fmt: skip
    assert first_commit.first_commit(defaulted, {}) is None
    # A session default is a property of every new table (Delta adds it), so it counts too.
    prefix = "spark.databricks.delta.properties.defaults."
    for setting, value in (("enableDeletionVectors", "true"), ("minWriterVersion", "7")):
        properties = first_commit.with_session_defaults({}, {f"{prefix}{setting}": value})
        assert first_commit.first_commit(plain, properties) is None, setting


def test_a_second_first_commit_replaces_nothing(tmp_path):
    plain = {"type": "struct", "fields": [{"name": "a", "type": "long", "metadata": {}}]}
    first, second = first_commit.first_commit(plain, {}), first_commit.first_commit(plain, {})
    assert first_commit.publish_first_commit(str(tmp_path), *first)
    assert not first_commit.publish_first_commit(str(tmp_path), *second)
    actions, checksum = _log(tmp_path)
    assert checksum["txnId"] == actions[0]["commitInfo"]["txnId"] == first[1]["txnId"]
    assert sorted(p.name for p in (tmp_path / "_delta_log").iterdir()) == [
        f"{0:020d}.crc",
        f"{0:020d}.json",
    ]


def test_delta_still_creates_a_table_whose_protocol_it_must_choose(spark, tmp_path):
    path = tmp_path / "ntz"
    create_delta_table(spark, _table(path), "id BIGINT, at TIMESTAMP_NTZ", {})
    actions, _ = _log(path)
    assert not actions[0]["commitInfo"]["engineInfo"].startswith("medallion/")
    assert "timestampNtz" in actions[-1]["protocol"]["readerFeatures"]


def test_without_hard_links_delta_creates_the_table(spark, tmp_path, monkeypatch):
    """A file system that refuses hard links (a FUSE mount): nothing of medallion's is left,
    and Delta's CREATE TABLE makes the table."""

    def refuse(*_args):
        raise PermissionError("no hard links here")

    monkeypatch.setattr(first_commit.os, "link", refuse)
    path = tmp_path / "fuse"
    create_delta_table(spark, _table(path), "id BIGINT", {})
    actions, _ = _log(path)
    assert not actions[0]["commitInfo"]["engineInfo"].startswith("medallion/")
    names = [p.name for p in (path / "_delta_log").iterdir() if p.is_file()]
    assert not [name for name in names if name.endswith(".tmp")], names


def test_a_table_deleted_and_created_again_in_the_same_session_starts_empty(spark, tmp_path):
    """Delta's cached log of the deleted table gives way to the new version 0."""
    import shutil

    path = tmp_path / "again"
    _medallion_creates(spark, path, "id BIGINT", {})
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (1), (2)")
    assert spark.read.format("delta").load(str(path)).count() == 2
    shutil.rmtree(path)
    _medallion_creates(spark, path, "id BIGINT", {})
    assert spark.read.format("delta").load(str(path)).count() == 0
    assert spark.sql(f"DESCRIBE HISTORY delta.`{path}`").count() == 1
