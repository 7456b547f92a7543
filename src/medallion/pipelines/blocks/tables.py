"""A dataset's tables declared from its contract, its validation and its bronze flow."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from medallion.column_stages import built_once
from medallion.contract_rules import Contract
from medallion.contracts import FieldRule, Stages, apply_validation, field_text, field_value
from medallion.declarations import (
    APPEND_ONLY,
    INGEST_METADATA,
    KAFKA_METADATA,
    Table,
)
from medallion.expectations import Expectations
from medallion.json_columns import as_string, json_field
from medallion.sql_names import validate_identifier
from medallion.streams.sinks import start_bronze_append
from medallion.transforms.bronze import METADATA_COLUMNS, kafka_position_columns


def validator(
    contract: Contract, free_text: tuple[str, ...] = ()
) -> Callable[[DataFrame, Expectations | None], DataFrame]:
    """The validation of ``contract``'s records: ``validate(bronze, expectations=None)`` gives
    bronze's rows with ``reason`` (NULL when valid), the rules each broke, every field typed
    (a string as its text, the others as their kind's value), the ``free_text`` fields (no
    rule: whatever JSON value they hold, as text) and the ingestion metadata."""

    def validate(bronze: DataFrame, expectations: Expectations | None = None) -> DataFrame:
        expectations = expectations or Expectations(contract.dataset)
        positions = tuple(kafka_position_columns(bronze))
        stages = _typed_stages(contract, free_text, positions, expectations)
        return apply_validation(bronze, stages)

    return validate


@built_once
def _typed_stages(
    contract: Contract,
    free_text: tuple[str, ...],
    kafka_positions: tuple[str, ...],
    expectations: Expectations,
) -> Stages:
    typed = [
        (field_text if f.kind == "string" else field_value)(f.name).alias(f.name)
        for f in contract.fields
    ]
    texts = [as_string(json_field(F.col("_doc"), name)).alias(name) for name in free_text]
    metadata = [F.col(name) for name in (*METADATA_COLUMNS, *kafka_positions)]
    return contract.validation_stages(expectations, [*typed, *texts, *metadata])


_SQL_TYPES = {
    "string": "STRING",
    "timestamp": "TIMESTAMP",
    "decimal": "DECIMAL(18,4)",
    "money": "DECIMAL(18,4)",
    "number": "DOUBLE",
    "integer": "BIGINT",
}


def bronze_fields(contract: Contract, free_text: tuple[str, ...] = ()) -> tuple[FieldRule, ...]:
    """The fields bronze keeps as text columns: the contract's, then the ``free_text`` ones."""
    return (*contract.fields, *(FieldRule(name, "string", False) for name in free_text))


def bronze_table(contract: Contract, free_text: tuple[str, ...] = ()) -> Table:
    """Bronze of ``contract``'s dataset: every line as it landed (each field, ``free_text``
    ones included, as text, the raw line, its file or Kafka record and ingestion time),
    append-only."""
    fields = ", ".join(f"{f.name} STRING" for f in bronze_fields(contract, free_text))
    schema = f"{fields}, {INGEST_METADATA}, {KAFKA_METADATA}"
    return Table("bronze", contract.dataset, schema, APPEND_ONLY)


def silver_table(contract: Contract, zorder: tuple[str, ...] = ()) -> Table:
    """Silver of ``contract``'s dataset: its valid records, each field typed by its kind (NOT
    NULL when required), with their ingestion time and file; append-only."""
    fields = ", ".join(
        f"{f.name} {_SQL_TYPES[f.kind]}{' NOT NULL' if f.required else ''}" for f in contract.fields
    )
    schema = f"{fields}, _ingested_at TIMESTAMP, _source_file STRING"
    return Table("silver", contract.dataset, schema, APPEND_ONLY, zorder=zorder)


def quarantine_table(contract: Contract, key_field: str) -> Table:
    """The quarantine of ``contract``'s dataset: each refused line with its ``key_field`` (as
    text, when it has one), its reason, the raw line, its file and ingestion time."""
    schema = (
        f"{validate_identifier(key_field, 'key field')} STRING, reason STRING NOT NULL, "
        "_raw STRING, _source_file STRING, _ingested_at TIMESTAMP"
    )
    return Table("silver", f"{contract.dataset}_quarantine", schema, quarantine=True)


def bronze_append(contract: Contract, free_text: tuple[str, ...] = ()) -> Callable[..., object]:
    """The start of a flow that appends every landed line of ``contract``'s dataset to its
    bronze table, unchanged (``Flow(..., Landing(dataset), (bronze,), bronze_append(c))``)."""
    return partial(start_bronze_append, fields=bronze_fields(contract, free_text))
