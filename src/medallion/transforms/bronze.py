"""Bronze: every non-blank input line, unchanged, with its parsed fields and ingestion metadata."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from medallion.contracts import (
    EVENT_FIELDS,
    FieldRule,
    as_string,
    is_blank,
    json_field,
    parse_json_line,
)

# Columns every bronze table carries after the parsed fields.
METADATA_COLUMNS = ("_raw", "_source_file", "_ingested_at")


def to_bronze(lines: DataFrame, fields: tuple[FieldRule, ...] = EVENT_FIELDS) -> DataFrame:
    """Turn raw lines into bronze rows.

    ``lines`` has ``value`` (one line, without its ``\\n``), ``_source_file`` and
    ``_ingested_at``; any other columns (Kafka metadata, say) are kept. A trailing ``\\r`` (CRLF
    files) is dropped and blank lines are not records. Each contract field becomes a string
    column holding the JSON value's text (NULL when absent or JSON null); the line itself is kept
    in ``_raw``, so fields of the wrong type, extra fields and malformed lines lose nothing.
    """
    raw = F.regexp_replace(F.col("value"), "\r$", "")
    passthrough = [c for c in lines.columns if c not in ("value", *METADATA_COLUMNS)]
    with_raw = lines.withColumn("_raw", raw).where(~is_blank(F.col("_raw")))
    parsed = with_raw.withColumn("_doc", parse_json_line(F.col("_raw")))
    return parsed.select(
        *[as_string(json_field(F.col("_doc"), f.name)).alias(f.name) for f in fields],
        *METADATA_COLUMNS,
        *passthrough,
    )
