"""``medallion status`` fails closed (issue 65): a stream whose lag cannot be told is named, and
``--max-lag`` exits 3 for it unless a stream is behind (exit 1). No Spark: the status's data."""

from __future__ import annotations

from medallion.console import plain
from medallion.ops.status import behind, lag_unknown, render_status
from medallion.streams.checkpoint_files import kafka_offsets, read_folder, source_kind


def _stream(name: str, lag: dict, started: bool = True) -> dict:
    return {
        "stream": name,
        "layer": "bronze",
        "lag": lag,
        "last_progress": None,
        "started": started,
        "last_batch": None,
    }


KAFKA = {
    "kind": "kafka",
    "records_behind": 30,
    "topics": [{"topic": "events", "partitions": 2, "records_behind": 30}],
}
UNKNOWN = {"kind": "files", "unknown": "no landing folder known (not started)"}


def test_kafka_records_count_against_max_lag_and_unknown_lags_are_named():
    status = {
        "lake": "/lake",
        "tables": [],
        "streams": [
            _stream("bronze_events", KAFKA),
            _stream("bronze_customers", UNKNOWN, started=False),
            _stream("silver_events", {"kind": "fused", "note": "carried by bronze_events"}),
            _stream(
                "gold_a",
                {
                    "kind": "delta",
                    "source": "silver/a",
                    "source_version": 2,
                    "position": None,
                    "index": None,
                    "versions_behind": 3,
                },
                started=False,
            ),
        ],
    }
    assert behind(status, max_lag=30) == []
    assert behind(status, max_lag=29) == [
        "bronze_events: 30 Kafka records of events unread (at most 29)"
    ]
    assert behind(status, max_lag=2)[1] == "gold_a: 3 versions of silver/a unread (at most 2)"
    # A fused stream is carried by its head: never unknown.
    assert lag_unknown(status) == [
        "bronze_customers: lag unknown: no landing folder known (not started)"
    ]
    text = plain(render_status(status))
    assert "30 records of events unread" in text
    assert "unknown: no landing folder known" in text
    assert "not started: 3 versions of silver/a unread" in text


def test_the_checkpoint_tells_the_source_its_position_and_its_folder(tmp_path):
    kafka, files = tmp_path / "kafka", tmp_path / "files"
    assert source_kind(str(kafka)) is None and kafka_offsets(str(kafka)) is None
    # Before a batch is committed: the offsets the Kafka source started at.
    (kafka / "sources" / "0").mkdir(parents=True)
    (kafka / "sources" / "0" / "0").write_text('\0v1\n{"events":{"0":4,"1":7}}')
    assert kafka_offsets(str(kafka)) == {"events": {0: 4, 1: 7}}
    (kafka / "offsets").mkdir()
    (kafka / "commits").mkdir()
    for batch, end in ((0, 10), (1, 25)):
        (kafka / "offsets" / str(batch)).write_text(
            f'v1\n{{"batchWatermarkMs":0,"batchTimestampMs":1}}\n{{"events":{{"0":{end},"1":9}}}}'
        )
    (kafka / "commits" / "0").write_text("v1\n{}")
    assert source_kind(str(kafka)) == "kafka"
    assert kafka_offsets(str(kafka)) == {"events": {0: 10, 1: 9}}  # batch 1 is not committed

    (files / "sources" / "0").mkdir(parents=True)
    (files / "offsets").mkdir()
    (files / "offsets" / "0").write_text('v1\n{"batchTimestampMs":1}\n{"logOffset":0}')
    assert source_kind(str(files)) == "files" and read_folder(str(files)) is None
    (files / "sources" / "0" / "0").write_text(
        'v1\n{"path":"file:///in/events/a.json","timestamp":1,"batchId":0}\n'
    )
    (files / "sources" / "0" / "1").write_text(
        'v1\n{"path":"file:///landing/events/b%20c.json","timestamp":2,"batchId":1}\n'
    )
    assert read_folder(str(files)) == "/landing/events"  # the newest batch's
