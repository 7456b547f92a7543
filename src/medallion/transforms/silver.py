"""Silver events: validate, split valid from quarantined, deduplicate by ``event_id``."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from medallion.contracts import (
    EVENT_FIELDS,
    REVENUE_TYPE,
    as_string,
    event_reason,
    field_text,
    field_value,
    json_field,
    parse_json_line,
    with_field_values,
)
from medallion.transforms.bronze import arrival_order, kafka_position_columns

SILVER_EVENT_COLUMNS = (
    "event_id",
    "event_type",
    "user_id",
    "product_id",
    "category",
    "revenue",
    "event_timestamp",
    "event_date",
    "_ingested_at",
    "_source_file",
)

QUARANTINE_COLUMNS = ("event_id", "reason", "_raw", "_source_file", "_ingested_at")


def validate_events(bronze: DataFrame, extra_columns: Sequence[str] = ()) -> DataFrame:
    """Bronze rows plus ``reason`` (NULL for a valid event) and the typed silver columns.

    ``extra_columns`` are more top-level input fields, taken from ``_raw`` as text (NULL when
    absent): the opt-in way to carry a new input field into silver (docs/operations.md). The
    Kafka position columns of bronze, when it has them, are kept for :func:`deduplicate_events`.
    """
    doc = F.col("_doc")
    with_doc = bronze.withColumn("_doc", parse_json_line(F.col("_raw")))
    fields = with_field_values(with_doc, doc, EVENT_FIELDS, F.col("_raw"))
    timestamp = field_value("event_timestamp")
    return fields.select(
        event_reason(F.col("_raw"), doc).alias("reason"),
        *[
            field_text(name).alias(name)
            for name in ("event_id", "event_type", "user_id", "product_id", "category")
        ],
        field_value("revenue").cast(REVENUE_TYPE).alias("revenue"),
        timestamp.alias("event_timestamp"),
        F.to_date(timestamp).alias("event_date"),
        "_raw",
        "_source_file",
        "_ingested_at",
        *[as_string(json_field(doc, name)).alias(name) for name in extra_columns],
        *kafka_position_columns(bronze),
    )


def valid_events(validated: DataFrame, extra_columns: Sequence[str] = ()) -> DataFrame:
    """The valid rows of :func:`validate_events`, in silver's columns (then ``extra_columns``),
    plus the Kafka position columns when there are any: :func:`deduplicate_events` orders by
    them and drops them."""
    return validated.where(F.col("reason").isNull()).select(
        *SILVER_EVENT_COLUMNS, *extra_columns, *kafka_position_columns(validated)
    )


def quarantined_events(validated: DataFrame) -> DataFrame:
    """The invalid rows of :func:`validate_events`, with their reason and raw line."""
    return validated.where(F.col("reason").isNotNull()).select(*QUARANTINE_COLUMNS)


# The content order that decides between copies of one ``event_id`` that arrived together (the
# lines of one file, which bronze keeps no position for): the least copy wins.
CONTENT_ORDER_COLUMNS = (
    "event_timestamp",
    "event_type",
    "user_id",
    "product_id",
    "category",
    "revenue",
)


def deduplicate_events(events: DataFrame) -> DataFrame:
    """One row per ``event_id``: the first to arrive (see :func:`arrival_order`: by ingestion
    time, then a Kafka record by partition and offset as numbers, a line by its file); copies
    that tie on all of that (lines of one file) are ordered by content, the least first:
    :data:`CONTENT_ORDER_COLUMNS` (a missing value first), then any extra columns, so the row
    kept never depends on how Spark ordered the batch.

    The Kafka position columns, if ``events`` has them, are dropped: the result has silver's
    columns (and any extra ones).
    """
    position = {"event_id", "_ingested_at", "_source_file", *kafka_position_columns(events)}
    extra = [
        c
        for c in events.columns
        if c not in position and c not in CONTENT_ORDER_COLUMNS and c != "event_date"
    ]
    first = Window.partitionBy("event_id").orderBy(
        *arrival_order(events), *CONTENT_ORDER_COLUMNS, *extra
    )
    ranked = events.withColumn("_rank", F.row_number().over(first)).where("_rank = 1")
    return ranked.drop("_rank", *kafka_position_columns(events))
