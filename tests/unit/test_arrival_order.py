"""The first-arrival tie-break of silver, in batch: Kafka records by partition and offset as
numbers, not by the text of their ``kafka://<topic>/<partition>/<offset>`` address; tied
customer changes by content first."""

from __future__ import annotations

import datetime as dt
import json

from pyspark.sql import functions as F

from medallion.pipelines.retail.contract import CUSTOMER_FIELDS, EVENT_FIELDS
from medallion.pipelines.retail.customers import silver_customers_batch
from medallion.pipelines.retail.tables import SILVER_CUSTOMERS
from medallion.pipelines.retail.transforms.customers import CUSTOMERS, validate_changes
from medallion.pipelines.retail.transforms.silver import (
    SILVER_EVENT_COLUMNS,
    deduplicate_events,
    valid_events,
    validate_events,
)
from medallion.transforms.bronze import to_bronze

# What the Kafka source gives bronze (medallion.streams.sources.kafka_lines), one micro-batch.
KAFKA_LINES = (
    "value string, _source_file string, _ingested_at timestamp, _kafka_topic string, "
    "_kafka_partition int, _kafka_offset bigint, _kafka_timestamp timestamp"
)
BATCH_TIME = dt.datetime(2026, 11, 20, 12, 0)


def kafka_lines(spark, records: list[tuple[str, int, int]]):
    """Lines as the Kafka source reads them: (value, partition, offset) on topic ``t``."""
    rows = [
        (value, f"kafka://t/{partition}/{offset}", BATCH_TIME, "t", partition, offset, BATCH_TIME)
        for value, partition, offset in records
    ]
    return spark.createDataFrame(rows, KAFKA_LINES)


def event(event_id: str, user_id: str) -> str:
    return (
        f'{{"event_id": "{event_id}", "event_type": "view", "user_id": "{user_id}", '
        '"product_id": "p1", "event_timestamp": "2026-11-20T10:00:00Z"}'
    )


def silver_rows(bronze):
    """What ``SilverEventsBatch`` MERGEs for one micro-batch of bronze."""
    return deduplicate_events(valid_events(validate_events(bronze)))


def test_offset_9_beats_offset_10_of_the_same_partition_in_one_batch(spark):
    lines = kafka_lines(
        spark,
        [
            (event("e1", "from-offset-10"), 0, 10),
            (event("e1", "from-offset-9"), 0, 9),
            # Partition 2 before partition 10, although "kafka://t/10/..." < "kafka://t/2/...".
            (event("e2", "from-partition-10"), 10, 1),
            (event("e2", "from-partition-2"), 2, 5),
        ],
    )
    silver = silver_rows(to_bronze(lines, EVENT_FIELDS))
    got = {row.event_id: (row.user_id, row._source_file) for row in silver.collect()}
    assert got == {
        "e1": ("from-offset-9", "kafka://t/0/9"),
        "e2": ("from-partition-2", "kafka://t/2/5"),
    }
    # The positions only order the batch: silver's columns are unchanged.
    assert tuple(silver.columns) == SILVER_EVENT_COLUMNS


def test_lines_from_files_are_still_ordered_by_file(spark):
    df = spark.createDataFrame(
        [(event("e1", "from-b"), "b.json"), (event("e1", "from-a"), "a.json")],
        "value string, _source_file string",
    ).withColumn("_ingested_at", F.lit(BATCH_TIME))
    silver = silver_rows(to_bronze(df, EVENT_FIELDS))
    assert [(row.user_id, row._source_file) for row in silver.collect()] == [("from-a", "a.json")]
    assert tuple(silver.columns) == SILVER_EVENT_COLUMNS


def test_tied_customer_changes_are_decided_by_content_and_only_then_by_offset(spark):
    """Changes that tie on (sequence_num, operation, updated_at): the greatest content wins
    (a missing value lowest), wherever it arrived; identical content keeps the lower offset."""

    def change(cid: str, name: str | None, at: str = "2026-11-20T10:00:00Z") -> str:
        return json.dumps(
            {
                "customer_id": cid,
                "name": name,
                "operation": "UPDATE",
                "sequence_num": 7,
                "updated_at": at,
            }
        )

    lines = kafka_lines(
        spark,
        [
            (change("c1", "b"), 0, 10),
            (change("c1", "a"), 0, 9),
            (change("c2", "same"), 0, 12),
            (change("c2", "same", at="2026-11-20T11:00:00+01:00"), 0, 11),  # the same instant
            (change("c3", None), 0, 1),
            (change("c3", ""), 0, 2),
        ],
    )
    shape = silver_customers_batch.shape(SILVER_CUSTOMERS)
    valid = validate_changes(to_bronze(lines, CUSTOMER_FIELDS)).where("reason IS NULL")
    newest = shape.newest_per_key(shape.changes(valid)).select(*shape.columns)
    got = {row.customer_id: (row.name, row._source_file) for row in newest.collect()}
    assert got == {
        "c1": ("b", "kafka://t/0/10"),
        "c2": ("same", "kafka://t/0/11"),
        "c3": ("", "kafka://t/0/2"),
    }
    assert tuple(newest.columns) == CUSTOMERS.change_columns


def test_copies_in_one_file_are_decided_by_content_revenue_and_category_included(spark):
    """Lines of one file carry no position in bronze: the least copy wins, whatever the line
    order, also when only revenue or category differ (a missing category first)."""

    def purchase(eid: str, revenue: float, category: str | None) -> str:
        record = {
            "event_id": eid,
            "event_type": "purchase",
            "user_id": "u1",
            "product_id": "p1",
            "revenue": revenue,
            "event_timestamp": "2026-11-20T10:00:00Z",
        }
        return json.dumps(record if category is None else {**record, "category": category})

    lines = [
        purchase("e1", 10, "toys"),
        purchase("e1", 5, "toys"),
        purchase("e2", 7, "toys"),
        purchase("e2", 7, None),
    ]
    df = spark.createDataFrame(
        [(line, "f.json") for line in lines], "value string, _source_file string"
    ).withColumn("_ingested_at", F.lit(BATCH_TIME))
    got = {
        r.event_id: (int(r.revenue), r.category)
        for r in silver_rows(to_bronze(df, EVENT_FIELDS)).collect()
    }
    assert got == {"e1": (5, "toys"), "e2": (7, None)}
