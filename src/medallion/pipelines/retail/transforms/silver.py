"""Silver events: validate, split valid from quarantined, deduplicate by ``event_id``."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from medallion.column_stages import built_once
from medallion.contracts import (
    Stages,
    apply_validation,
    field_text,
    field_value,
)
from medallion.expectations import Expectations
from medallion.json_columns import MONEY_TYPE, as_string, json_field
from medallion.pipelines.retail.contract import EVENT_FIELDS, EVENTS
from medallion.transforms.bronze import (
    KAFKA_POSITION_COLUMNS,
    METADATA_COLUMNS,
    arrival_order,
    kafka_columns,
    kafka_position_columns,
)

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


# The fields whose bronze text column differs from silver's typed one, and the names their text
# has in the output of ``validate_events(..., with_bronze=True)``.
_BRONZE_TEXT = {"revenue": "__bronze_revenue", "event_timestamp": "__bronze_event_timestamp"}


def validate_events(
    bronze: DataFrame,
    extra_columns: Sequence[str] = (),
    with_bronze: bool = False,
    kafka: Sequence[str] | None = None,
    expectations: Expectations | None = None,
) -> DataFrame:
    """Bronze rows plus ``reason`` (NULL for a valid event), the rules each broke
    (``_failed_rules``, medallion/expectations.py) and the typed silver columns.

    ``bronze`` needs ``_raw``, ``_source_file`` and ``_ingested_at``: bronze rows, or the
    :func:`~medallion.transforms.bronze.raw_lines` of a batch of input. ``extra_columns`` are
    more top-level input fields, taken from ``_raw`` as text (NULL when absent): the opt-in way
    to carry a new input field into silver (docs/operations.md). The Kafka position columns of
    bronze, when it has them, are kept for :func:`deduplicate_events`.

    With ``with_bronze`` the result also holds what bronze keeps of each line, so one parse of
    a batch of ``raw_lines`` serves bronze and silver alike (:func:`bronze_rows` selects it).

    ``kafka`` names the Kafka columns of ``bronze``; when None they are found in its schema,
    which a query function of a Declarative Pipeline may not look at. ``expectations`` say
    which broken rules let an event pass (default: none).
    """
    kafka = kafka_columns(bronze) if kafka is None else kafka
    expectations = expectations or Expectations(EVENTS.dataset)
    stages = _validation(tuple(extra_columns), tuple(kafka), with_bronze, expectations)
    return apply_validation(bronze, stages)


@built_once
def _validation(
    extra_columns: tuple[str, ...],
    kafka: tuple[str, ...],
    with_bronze: bool,
    expectations: Expectations,
) -> Stages:
    """The projections of :func:`validate_events`."""
    doc = F.col("_doc")
    timestamp = field_value("event_timestamp")
    positions = [name for name in KAFKA_POSITION_COLUMNS if name in kafka]
    bronze_only = (
        [field_text(name).alias(alias) for name, alias in _BRONZE_TEXT.items()]
        + [c for c in kafka if c not in positions]
        if with_bronze
        else []
    )
    result = [
        *[
            field_text(name).alias(name)
            for name in ("event_id", "event_type", "user_id", "product_id", "category")
        ],
        field_value("revenue").cast(MONEY_TYPE).alias("revenue"),
        timestamp.alias("event_timestamp"),
        F.to_date(timestamp).alias("event_date"),
        F.col("_raw"),
        F.col("_source_file"),
        F.col("_ingested_at"),
        *[as_string(json_field(doc, name)).alias(name) for name in extra_columns],
        *[F.col(c) for c in positions],
        *[F.col(c) if isinstance(c, str) else c for c in bronze_only],
    ]
    return EVENTS.validation_stages(expectations, result)


def bronze_rows(validated: DataFrame) -> DataFrame:
    """The bronze rows of ``validate_events(raw_lines(...), with_bronze=True)``: every line,
    valid or not, with each field's JSON text, as :func:`~medallion.transforms.bronze.to_bronze`
    makes them."""
    texts = {name: F.col(alias).alias(name) for name, alias in _BRONZE_TEXT.items()}
    return validated.select(
        *[texts.get(f.name, F.col(f.name)) for f in EVENT_FIELDS],
        *METADATA_COLUMNS,
        *kafka_columns(validated),
    )


def valid_events(
    validated: DataFrame, extra_columns: Sequence[str] = (), kafka: Sequence[str] | None = None
) -> DataFrame:
    """The valid rows of :func:`validate_events`, in silver's columns (then ``extra_columns``),
    plus the Kafka position columns when there are any (``kafka`` as for
    :func:`validate_events`): :func:`deduplicate_events` orders by them and drops them."""
    positions = kafka_position_columns(validated) if kafka is None else kafka
    positions = [c for c in KAFKA_POSITION_COLUMNS if c in positions]
    return validated.where(F.col("reason").isNull()).select(
        *SILVER_EVENT_COLUMNS, *extra_columns, *positions
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
