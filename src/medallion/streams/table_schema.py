"""Schema drift of a table a stream writes: additive columns are fine, breaking changes stop it.

A stream that MERGEs into silver checks the table's schema before each write against the
schema the pipeline writes (the contract's columns, then the configured extra columns):

- a column the pipeline writes is missing (renamed or dropped), or has another type: the
  batch fails with :class:`SchemaMismatchError`, whose message says how to recover;
- the table has columns the pipeline does not write (an extra column carried before, or added
  by someone): they are left NULL in new rows, and the MERGE runs with schema evolution.

How to carry a new input field into silver, and how to recover: docs/operations.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql.types import DataType, StringType, StructType

from medallion.errors import is_failure
from medallion.pipelines import declared_table
from medallion.sql_names import TableRef
from medallion.tables import read_table


class SchemaMismatchError(RuntimeError):
    """A table no longer has the columns or types a stream writes; the message says what to do."""


def is_restartable_schema_change(error: BaseException | None) -> bool:
    """True when a stream failed because its Delta source gained columns (restart picks them up)."""
    return is_failure(error, "source schema changed")


@dataclass(frozen=True)
class SchemaCheck:
    """The outcome of comparing a table's schema with the schema a stream writes."""

    problems: tuple[str, ...]
    unexpected: tuple[str, ...]

    @property
    def breaking(self) -> bool:
        """True when the stream must not write (a column missing or of another type)."""
        return bool(self.problems)


def expected_schema(key: str, extra_columns: Sequence[str] = ()) -> StructType:
    """The schema the pipeline writes to a table: the contract's columns, then extras as STRING."""
    schema = DataType.fromDDL(declared_table(key).schema)
    assert isinstance(schema, StructType)
    for name in extra_columns:
        schema = schema.add(name, StringType(), True)
    return schema


def compare(actual: StructType, expected: StructType, optional: Sequence[str] = ()) -> SchemaCheck:
    """The breaking differences (by name, case-insensitive; nullability ignored) and extras.

    ``optional`` columns may be absent (extra columns, added by the first write that carries
    them); when present they must have the expected type like the others.
    """
    have = {f.name.lower(): f for f in actual.fields}
    want = {f.name.lower(): f for f in expected.fields}
    may_lack = {name.lower() for name in optional}
    problems = []
    for name, field in want.items():
        found = have.get(name)
        if found is None:
            if name not in may_lack:
                problems.append(f"column {field.name} is missing (renamed or dropped)")
        elif found.dataType != field.dataType:
            problems.append(
                f"column {field.name} is {found.dataType.simpleString().upper()}, "
                f"expected {field.dataType.simpleString().upper()} (type changed)"
            )
    unexpected = tuple(f.name for f in actual.fields if f.name.lower() not in want)
    return SchemaCheck(tuple(problems), unexpected)


def check_table_schema(
    spark: SparkSession,
    table: TableRef,
    stream: str,
    checkpoint: str,
    extra_columns: Sequence[str] = (),
) -> SchemaCheck:
    """Compare ``table`` with what ``stream`` writes; raise :class:`SchemaMismatchError` if broken."""
    expected = expected_schema(table.key, extra_columns)
    check = compare(read_table(spark, table).schema, expected, optional=extra_columns)
    if check.breaking:
        raise SchemaMismatchError(breaking_change_message(table, stream, checkpoint, check))
    return check


def breaking_change_message(
    table: TableRef, stream: str, checkpoint: str, check: SchemaCheck
) -> str:
    """What changed, that the stream stopped, and the two ways to recover."""
    lake = checkpoint.rsplit("/_checkpoints/", 1)[0] if "/_checkpoints/" in checkpoint else "LAKE"
    return (
        f"breaking schema change in {table.key}: {'; '.join(check.problems)}; stream {stream} "
        "stopped before writing. Recover: RESTORE the table to its version before the change "
        f"(DESCRIBE HISTORY), or rebuild it from the layer above: medallion reset --lake {lake} "
        f"--layer {table.layer} --table {table.key} --yes, then medallion run "
        "(docs/operations.md)"
    )


def schema_mismatch_in(text: str) -> str | None:
    """The message of a :class:`SchemaMismatchError` inside an error's text (a Python traceback
    carried by a failed ``foreachBatch``), or None."""
    marker = f"{SchemaMismatchError.__name__}: "
    for line in text.splitlines():
        if marker in line:
            return line.split(marker, 1)[1].strip()[:800]
    return None
