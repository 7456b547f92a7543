"""Bronze: every non-blank input line, unchanged, with its parsed fields and ingestion metadata."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from medallion.column_stages import apply_stages
from medallion.contracts import FieldRule
from medallion.json_columns import as_string, is_blank, json_field, parse_json_line_stages

# Columns every bronze table carries after the parsed fields.
METADATA_COLUMNS = ("_raw", "_source_file", "_ingested_at")

# Where a Kafka record was read (NULL for a line read from a file). Silver carries them through
# validation only to order the records of one micro-batch: see :func:`arrival_order`.
KAFKA_POSITION_COLUMNS = ("_kafka_topic", "_kafka_partition", "_kafka_offset")


# Everything bronze keeps of a Kafka record besides its value (NULL for a line of a file).
KAFKA_COLUMNS = (*KAFKA_POSITION_COLUMNS, "_kafka_timestamp")


def kafka_columns(df: DataFrame) -> list[str]:
    """The Kafka metadata columns that ``df`` has (none for lines read from files)."""
    return [name for name in KAFKA_COLUMNS if name in df.columns]


def kafka_position_columns(df: DataFrame) -> list[str]:
    """The Kafka position columns that ``df`` has (none for lines read from files)."""
    return [name for name in KAFKA_POSITION_COLUMNS if name in df.columns]


def arrival_order(df: DataFrame) -> list[Column]:
    """The order in which the rows of ``df`` arrived, earliest first, for a first-arrival pick.

    By ``_ingested_at``, then a Kafka record by its position (topic, then partition and offset as
    numbers: ``_source_file`` is ``kafka://<topic>/<partition>/<offset>``, whose text puts offset
    10 before offset 9), then by ``_source_file`` (the file of a line; NULL positions sort first).
    """
    names = ["_ingested_at", *kafka_position_columns(df), "_source_file"]
    return [F.col(name).asc() for name in names]


def to_bronze(lines: DataFrame, fields: tuple[FieldRule, ...]) -> DataFrame:
    """Turn raw lines into bronze rows.

    ``lines`` has ``value`` (one line, without its ``\\n``), ``_source_file`` and
    ``_ingested_at``; any other columns (Kafka metadata, say) are kept. One trailing ``\\r``
    (CRLF files) is dropped and blank lines are not records. Each contract field becomes a string
    column holding the JSON value's text (NULL when absent or JSON null); the line itself is kept
    in ``_raw``, so fields of the wrong type, extra fields and malformed lines lose nothing.
    """
    parsed = apply_stages(raw_lines(lines), parse_json_line_stages(F.col("_raw")))
    return parsed.select(
        *[as_string(json_field(F.col("_doc"), f.name)).alias(f.name) for f in fields],
        *METADATA_COLUMNS,
        *[c for c in lines.columns if c not in ("value", *METADATA_COLUMNS)],
    )


def raw_lines(lines: DataFrame) -> DataFrame:
    """The records among ``lines``: ``value`` becomes ``_raw`` without the ``\\r`` of a CRLF
    ending, and blank lines are dropped. Other columns are kept."""
    # Only the last CR, the one of a CRLF ending: ``\z`` is the very end of the text, whereas
    # Java's ``$`` also matches before a final CR, so ``\r$`` took both CRs of ``...}\r\r``.
    # The CR left over is JSON whitespace after the value.
    raw = F.regexp_replace(F.col("value"), r"\r\z", "")
    return lines.withColumn("_raw", raw).where(~is_blank(F.col("_raw"))).drop("value")
