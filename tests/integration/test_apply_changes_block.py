"""The apply-changes block (medallion/pipelines/blocks/changes.py) on real Delta tables, against
plain Python: typed events and full-row change records, stored as SCD type 1 and type 2, with
deletes, truncations, late and repeated changes, each batch run twice (a replay writes nothing
twice); and an exact aggregate of a type 1 table read through its change data feed."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from medallion.config import Config
from medallion.declarations import Flow, Table
from medallion.pipelines.blocks import ApplyChanges, IncrementalAggregate, Measure
from medallion.tables import create_delta_table, read_table

CDF = {"delta.enableChangeDataFeed": "true"}
# Typed events stay in make test-fast; the other cases run in make test (docs/testing.md).
SHAPES = ["typed events", pytest.param("full rows", marks=pytest.mark.slow)]
EVENT_SCHEMA = "shipment_id STRING, status STRING, location STRING, seq BIGINT"
EVENTS = Table("silver", "shipment_events", EVENT_SCHEMA)
ROW_SCHEMA = (
    "id STRING, name STRING, tier STRING, sequence_num BIGINT, updated_at TIMESTAMP, "
    "operation STRING"
)
CHANGES = Table("bronze", "member_changes", ROW_SCHEMA)

# Typed events: a shipment's status by its sequence; "cancelled" deletes it.
TYPED = dict(keys=("shipment_id",), sequence_by="seq", apply_as_deletes="status = 'cancelled'")
# Full rows: INSERT/UPDATE/DELETE by (sequence_num, updated_at); TRUNCATE empties the table.
FULL = dict(
    keys=("id",),
    sequence_by="struct(sequence_num, updated_at)",
    apply_as_deletes="operation = 'DELETE'",
)


def _typed_batches() -> list[list[tuple]]:
    return [
        [
            ("s1", "created", "hub-a", 1),
            ("s1", "shipped", "hub-a", 2),
            ("s2", "created", "hub-b", 1),
            ("s3", "created", "hub-c", 5),
        ],
        [
            ("s1", "created", "hub-a", 1),  # a repeat
            ("s2", "cancelled", "hub-b", 4),  # deletes s2
            ("s3", "created", "hub-d", 5),  # ties s3's: the greater content wins
            ("s4", "shipped", "hub-a", 3),
        ],
        [
            ("s2", "shipped", "hub-b", 3),  # late and older than s2's delete: stays deleted
            ("s1", "in_transit", "hub-e", 3),
            ("s1", "in_transit", "hub-f", 4),  # only the location changes (untracked in SCD 2)
            ("s4", "created", "hub-a", 1),  # late
            ("s5", "cancelled", None, 2),  # a delete before the key's first upsert
        ],
        [
            ("s5", "created", "hub-a", 1),  # late, older than its delete
            ("s2", "created", "hub-b", 6),  # newer than the delete: s2 comes back
            ("s1", "shipped", "hub-a", 2),  # a late repeat
        ],
    ]


def _full_batches() -> list[list[tuple]]:
    at = lambda h: datetime(2026, 12, 1, h)  # noqa: E731
    return [
        [
            ("m1", "Ada", "gold", 1, at(1), "INSERT"),
            ("m2", "Bo", "silver", 1, at(1), "INSERT"),
            ("m1", "Ada", "platinum", 2, at(2), "UPDATE"),
        ],
        [
            ("m2", None, None, 2, at(3), "DELETE"),
            ("m3", "Cy", "bronze", 1, at(2), "INSERT"),
            ("m2", "Bo", "gold", 2, at(2), "UPDATE"),  # same sequence, earlier: the delete wins
        ],
        [
            ("m1", "Ada L.", "platinum", 3, at(4), "UPDATE"),  # an untracked column changes
            ("m3", "Cy", "silver", 1, at(1), "UPDATE"),  # late and older
            ("m4", "Di", "gold", 4, at(5), "INSERT"),
        ],
        [
            ("m2", "Bo", "gold", 3, at(6), "INSERT"),  # back after the delete
            ("m1", "Ada", "gold", 1, at(1), "INSERT"),  # a late repeat
        ],
    ]


def _order(change: dict, sequence: tuple, content: tuple) -> tuple:
    lowest = lambda v: (v is not None, v)  # noqa: E731  Spark orders NULL lowest
    return (sequence, change["delete"], tuple(map(lowest, content)))


def _oracle_type_1(changes: list[dict]) -> set[tuple]:
    """Each key's greatest change newer than the newest truncation, unless it deletes."""
    cut = max((c["order"] for c in changes if c["truncate"]), default=None)
    state: dict = {}
    for change in changes:
        if change["truncate"] or (cut is not None and change["order"] <= cut):
            continue
        if change["key"] not in state or change["order"] > state[change["key"]]["order"]:
            state[change["key"]] = change
    return {c["row"] for c in state.values() if not c["delete"]}


def _oracle_type_2(changes: list[dict], tracked: list[int]) -> set[tuple]:
    """Every version: (row, start, end), applying each key's distinct changes in order."""
    versions, by_key = [], {}
    for change in changes:
        by_key.setdefault(change["key"], {})[change["order"]] = change
    for ordered in by_key.values():
        previous, open_version = None, None
        for change in (ordered[o] for o in sorted(ordered)):
            after_nothing = previous is None or previous["delete"]
            if change["delete"]:
                if after_nothing:  # a row of its own, without content
                    keyless = tuple(v if i == 0 else None for i, v in enumerate(change["row"]))
                    versions.append([keyless, change["sequence"], change["sequence"]])
                else:
                    open_version[2] = change["sequence"]
            elif after_nothing or [change["row"][i] for i in tracked] != [
                previous["row"][i] for i in tracked
            ]:
                if open_version is not None and not previous["delete"]:
                    open_version[2] = change["sequence"]
                open_version = [change["row"], change["sequence"], None]
                versions.append(open_version)
            else:
                open_version[0] = change["row"]
            previous = change
    return {tuple(v) for v in versions}


def _typed_change(row: tuple) -> dict:
    change = {"key": row[0], "row": row, "sequence": row[3], "truncate": False}
    change["delete"] = row[1] == "cancelled"
    change["order"] = _order(change, (row[3],), (row[1], row[2], row[3]))
    return change


def _full_change(row: tuple) -> dict:
    sequence = (row[3], row[4])
    change = {"key": row[0], "row": row, "sequence": sequence}
    change["delete"], change["truncate"] = row[5] == "DELETE", row[5] == "TRUNCATE"
    change["order"] = _order(change, (sequence,), row[1:])
    if change["truncate"]:
        change["order"] = _order({"delete": True}, (sequence,), row[1:])
    return change


def _batch_function(spark, config, tmp_path, flow: Flow):
    for table in flow.outputs:
        create_delta_table(spark, config.table(table.key), table.schema, dict(table.properties))
    checkpoint = tmp_path / "checkpoints" / flow.name
    checkpoint.mkdir(parents=True)
    (checkpoint / "metadata").write_text(json.dumps({"id": f"query-{flow.name}"}))
    return flow.batch_function(config, str(checkpoint))


def _run(spark, tmp_path, block: ApplyChanges, target: Table, source: Table, batches):
    config = Config(landing=str(tmp_path / "landing"), lake=str(tmp_path / "lake"))
    outputs = (target, block.tombstones(target)) if block.stored_as == 1 else (target,)
    apply = _batch_function(
        spark, config, tmp_path, Flow("apply", "silver", source, outputs, batch=block)
    )
    for batch_id, batch in enumerate(batches):
        frame = spark.createDataFrame(batch, source.schema)
        for _attempt in range(2):  # a replay after a crash writes nothing twice
            apply(frame, batch_id)
        yield config


@pytest.mark.parametrize("shape", SHAPES)
def test_type_1_keeps_each_keys_newest_change_whatever_the_order_of_arrival(spark, tmp_path, shape):
    if shape == "typed events":
        block, source, batches, change = (
            ApplyChanges(**TYPED),
            EVENTS,
            _typed_batches(),
            _typed_change,
        )
        target = Table("silver", "shipments", EVENT_SCHEMA, CDF)
    else:
        block = ApplyChanges(**FULL, apply_as_truncates="operation = 'TRUNCATE'")
        source, change = CHANGES, _full_change
        batches = _full_batches()
        at = datetime(2026, 12, 1, 4, 30)
        batches.insert(
            3, [("m9", None, None, 3, at, "TRUNCATE"), ("m4", "Di", "gold", 5, at, "UPDATE")]
        )
        target = Table("silver", "members", ROW_SCHEMA, CDF)
    seen = []
    for config, batch in zip(
        _run(spark, tmp_path, block, target, source, batches), batches, strict=True
    ):
        seen += [change(row) for row in batch]
        rows = read_table(spark, config.table(target.key)).collect()
        assert {tuple(r) for r in rows} == _oracle_type_1(seen)
        assert len(rows) == len({r[0] for r in rows})


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["typed events", "full rows"])
def test_type_2_keeps_every_version_and_places_late_changes(spark, tmp_path, shape):
    if shape == "typed events":
        block = ApplyChanges(**TYPED, stored_as=2, track_history=("status",))
        source, batches, change, tracked = EVENTS, _typed_batches(), _typed_change, [1]
        target = block.history_table("silver", "shipment_history", EVENT_SCHEMA, "BIGINT")
    else:
        block = ApplyChanges(**FULL, stored_as=2, track_history=("tier",))
        source, batches, change, tracked = CHANGES, _full_batches(), _full_change, [2]
        sequence_type = "STRUCT<sequence_num: BIGINT, updated_at: TIMESTAMP>"
        target = block.history_table("silver", "member_history", ROW_SCHEMA, sequence_type)
    columns = [c for c in source.columns]
    seen = []
    for config, batch in zip(
        _run(spark, tmp_path, block, target, source, batches), batches, strict=True
    ):
        seen += [change(row) for row in batch]
        rows = read_table(spark, config.table(target.key)).select(
            *columns, "__START_AT", "__END_AT"
        )
        got = set()
        for r in rows.collect():
            start, end = r["__START_AT"], r["__END_AT"]
            if shape == "full rows":
                start = tuple(start) if start is not None else None
                end = tuple(end) if end is not None else None
            got.add((tuple(r[c] for c in columns), start, end))
        assert got == _oracle_type_2(seen, tracked)


@pytest.mark.slow
def test_an_aggregate_of_a_type_1_tables_change_feed_stays_exact(spark, tmp_path):
    config = Config(landing=str(tmp_path / "landing"), lake=str(tmp_path / "lake"))
    state = Table("silver", "shipments", EVENT_SCHEMA, CDF)
    block = ApplyChanges(**TYPED)
    apply = _batch_function(
        spark,
        config,
        tmp_path,
        Flow("silver_shipments", "silver", EVENTS, (state, block.tombstones(state)), batch=block),
    )
    per_status = Table(
        "gold", "shipments_per_status", "status STRING NOT NULL, shipments BIGINT NOT NULL"
    )
    count = IncrementalAggregate(("status",), (Measure("shipments", "count"),))
    gold = _batch_function(
        spark,
        config,
        tmp_path,
        Flow("gold_per_status", "gold", state, (per_status,), change_feed=True, batch=count),
    )
    table, read_from, seen = config.table(state.key), 1, []
    for batch_id, batch in enumerate(_typed_batches()):
        apply(spark.createDataFrame(batch, EVENT_SCHEMA), batch_id)
        feed = (
            spark.read.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", read_from)
            .load(table.path)
        )
        for _attempt in range(2):
            gold(feed, batch_id)
        read_from = (
            spark.sql(f"DESCRIBE HISTORY delta.`{table.path}`").agg({"version": "max"}).first()[0]
            + 1
        )
        seen += [_typed_change(row) for row in batch]
        expected: dict[str, int] = {}
        for row in _oracle_type_1(seen):
            expected[row[1]] = expected.get(row[1], 0) + 1
        got = read_table(spark, config.table(per_status.key)).collect()
        assert {r["status"]: r["shipments"] for r in got} == expected


def test_an_aggregate_of_a_change_feed_takes_counts_and_sums_only(tmp_path):
    config = Config(landing=str(tmp_path / "landing"), lake=str(tmp_path / "lake"))
    state = Table("silver", "shipments", EVENT_SCHEMA, CDF)
    latest = IncrementalAggregate(
        ("status",), (Measure("n", "count"), Measure("last", "max", "seq"))
    )
    gold = Table("gold", "g", "status STRING, n BIGINT, last BIGINT")
    flow = Flow("gold_g", "gold", state, (gold,), change_feed=True, batch=latest)
    with pytest.raises(ValueError, match="counts and sums only"):
        flow.batch_function(config, str(tmp_path))


def test_a_declaration_that_cannot_be_applied_is_refused():
    with pytest.raises(ValueError, match="type 1 table only"):
        ApplyChanges(("id",), "seq", apply_as_truncates="op = 'T'", stored_as=2)
    with pytest.raises(ValueError, match="type 2 table only"):
        ApplyChanges(("id",), "seq", track_history=("a",))
    with pytest.raises(ValueError, match="column"):
        ApplyChanges(("id; DROP TABLE x",), "seq")
