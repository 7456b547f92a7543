"""Customer change records: validate, pick each customer's newest change, and enrich purchases."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from medallion.contracts import (
    CUSTOMER_FIELDS,
    REVENUE_SUM_TYPE,
    customer_reason,
    field_text,
    field_value,
    parse_json_line,
    with_field_values,
)
from medallion.transforms.bronze import arrival_order, kafka_position_columns

STATE_COLUMNS = ("customer_id", "name", "email", "country", "segment", "sequence_num", "updated_at")
CHANGE_COLUMNS = (*STATE_COLUMNS, "operation", "_ingested_at", "_source_file")
QUARANTINE_COLUMNS = ("customer_id", "reason", "_raw", "_source_file", "_ingested_at")
UNKNOWN_COUNTRY = "unknown"

# Changes of one customer are ordered by (sequence_num, operation rank, updated_at): on an equal
# sequence number a DELETE beats an UPDATE, which beats an INSERT, then the later updated_at
# wins. Changes that tie on those three are ordered by their content (name, email, country,
# segment, compared as text, a missing value lowest), so the greatest change wins whatever the
# order of arrival. The same order decides within a batch and, in the MERGE, across batches.
_OPERATION_RANK_SQL = "CASE {a}operation WHEN 'DELETE' THEN 3 WHEN 'UPDATE' THEN 2 ELSE 1 END"
CONTENT_ORDER_COLUMNS = ("name", "email", "country", "segment")


def sequence_order_sql(alias: str = "") -> str:
    """SQL for (``sequence_num``, operation rank, ``updated_at``): the part of the ordering key
    that a tombstone (a DELETE without its content) can be compared with."""
    a = f"{alias}." if alias else ""
    rank = _OPERATION_RANK_SQL.format(a=a)
    return f"named_struct('seq', {a}sequence_num, 'rank', {rank}, 'at', {a}updated_at)"


def change_order_sql(alias: str = "") -> str:
    """SQL for the ordering key of a change, for comparisons such as ``s.key > t.key``:
    :func:`sequence_order_sql`, then the content columns, so that two different changes never
    tie. (Spark orders a NULL field of a struct below any value, in comparisons and sorts.)"""
    a = f"{alias}." if alias else ""
    content = ", ".join(f"'{c}', {a}{c}" for c in CONTENT_ORDER_COLUMNS)
    return f"named_struct('key', {sequence_order_sql(alias)}, {content})"


def validate_changes(bronze: DataFrame) -> DataFrame:
    """Bronze customer rows plus ``reason`` (NULL when valid) and typed change columns."""
    doc = F.col("_doc")
    with_doc = bronze.withColumn("_doc", parse_json_line(F.col("_raw")))
    fields = with_field_values(with_doc, doc, CUSTOMER_FIELDS)
    return fields.select(
        customer_reason(F.col("_raw"), doc).alias("reason"),
        *[
            field_text(name).alias(name)
            for name in ("customer_id", "name", "email", "country", "segment", "operation")
        ],
        field_value("sequence_num").alias("sequence_num"),
        field_value("updated_at").alias("updated_at"),
        "_raw",
        "_source_file",
        "_ingested_at",
        *kafka_position_columns(bronze),
    )


def valid_changes(validated: DataFrame) -> DataFrame:
    """The valid rows of :func:`validate_changes`, as change records (plus the Kafka position
    columns when there are any: :func:`latest_change_per_customer` orders by them and drops
    them)."""
    return validated.where(F.col("reason").isNull()).select(
        *CHANGE_COLUMNS, *kafka_position_columns(validated)
    )


def quarantined_changes(validated: DataFrame) -> DataFrame:
    """The invalid rows of :func:`validate_changes`, with their reason and raw line."""
    return validated.where(F.col("reason").isNotNull()).select(*QUARANTINE_COLUMNS)


def latest_change_per_customer(changes: DataFrame) -> DataFrame:
    """One change per customer: the greatest by :func:`change_order_sql` (``sequence_num``,
    operation, ``updated_at``, then content). Only changes equal in all of these, which carry
    the same values, are left to arrival order (see ``arrival_order``): the first one's
    ``_ingested_at`` and ``_source_file`` are kept.

    A MERGE fails when several source rows match one target row, so every batch goes through
    this first.
    """
    newest = Window.partitionBy("customer_id").orderBy(
        F.expr(change_order_sql()).desc(), *arrival_order(changes)
    )
    ranked = changes.withColumn("_rank", F.row_number().over(newest)).where("_rank = 1")
    return ranked.drop("_rank", *kafka_position_columns(changes))


def newer_than_tombstones(changes: DataFrame, tombstones: DataFrame) -> DataFrame:
    """Drop changes that are not newer than their customer's recorded DELETE.

    A tombstone keeps no content, so it is compared by :func:`sequence_order_sql` only: a DELETE
    that ties with it on (``sequence_num``, ``updated_at``) is not newer, whatever its content.
    """
    deleted = tombstones.select(
        "customer_id",
        F.expr("named_struct('seq', sequence_num, 'rank', 3, 'at', updated_at)").alias(
            "_tombstone_key"
        ),
    )
    newer = F.col("_tombstone_key").isNull() | (
        F.expr(sequence_order_sql()) > F.col("_tombstone_key")
    )
    return changes.join(deleted, "customer_id", "left").where(newer).drop("_tombstone_key")


def enrich_purchases(purchases: DataFrame, customers: DataFrame) -> DataFrame:
    """Purchases with their customer's ``country``; ``unknown`` when there is no live customer."""
    countries = customers.select(
        F.col("customer_id").alias("_customer_id"), F.col("country").alias("_country")
    )
    return (
        purchases.join(countries, F.col("user_id") == F.col("_customer_id"), "left")
        .withColumn("country", F.coalesce(F.col("_country"), F.lit(UNKNOWN_COUNTRY)))
        .drop("_customer_id", "_country")
    )


def daily_revenue_by_country(enriched_purchases: DataFrame) -> DataFrame:
    """Revenue and purchase counts per (``event_date``, ``country``)."""
    return enriched_purchases.groupBy("event_date", "country").agg(
        F.sum("revenue").cast(REVENUE_SUM_TYPE).alias("revenue"),
        F.count(F.lit(1)).alias("purchases"),
    )
