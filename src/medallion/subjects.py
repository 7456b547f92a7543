"""Data subjects: which columns of a pipeline identify a person, which rows of each table
belong to one, and how the gold aggregates that name nobody are recomputed without them.

A pipeline declares :class:`Subjects` (issue 29, erasure; docs/governance.md). The engine
names no column: a table holds a subject's rows where it has one of the declared columns, or,
for a table of raw lines (bronze, a quarantine: ``_raw``), where one of the declared fields
of the line, read from its parsed JSON, holds the subject's id (a line too malformed to parse
is read by the field's ``"name": "value"`` text). Any other field holding the same text (a
country, a product) does not make a line the subject's. A gold aggregate that has neither is
declared a :class:`Recompute`: its rows in the subject's scope (the hours, the days their
records fell in) are computed again from silver once the subject's silver rows are gone.

>>> Subjects({"events": "user_id", "customers": "customer_id"}).column_names
('customer_id', 'user_id')
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from functools import reduce
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from medallion.declarations import RAW_COLUMN
from medallion.sql_names import quote_identifier, validate_identifier

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from medallion.config import Config


@dataclass(frozen=True)
class Recompute:
    """A gold aggregate with no subject column, recomputed in the subject's scope.

    ``source`` is the silver table it is computed from; ``scoped`` adds the ``scope`` column
    to source rows (a column of the gold table: the hour, the day); ``rows(spark, config,
    scoped_source_rows)`` gives the gold rows of the scope values those rows carry, as the
    flow that keeps the table computes them over every row so far.
    """

    table: str
    source: str
    scope: str
    scoped: Callable[[DataFrame], DataFrame] = field(compare=False)
    rows: Callable[[SparkSession, Config, DataFrame], DataFrame] = field(compare=False)

    def __post_init__(self) -> None:
        validate_identifier(self.scope, "scope column")


@dataclass(frozen=True)
class Subjects:
    """The columns that identify a data subject, by input dataset (one id space: the same id
    in two of them is one person), and the gold aggregates recomputed without them."""

    columns: Mapping[str, str]
    recomputes: tuple[Recompute, ...] = ()

    def __post_init__(self) -> None:
        for column in self.columns.values():
            validate_identifier(column, "subject column")

    @property
    def column_names(self) -> tuple[str, ...]:
        """The distinct subject columns, sorted."""
        return tuple(sorted(set(self.columns.values())))

    def holding_columns(self, table_columns: Iterable[str]) -> tuple[str, ...]:
        """The subject columns among ``table_columns``."""
        present = set(table_columns)
        return tuple(c for c in self.column_names if c in present)

    def recompute_of(self, table_key: str) -> Recompute | None:
        """How ``table_key`` is recomputed, when it is declared so."""
        return next((r for r in self.recomputes if r.table == table_key), None)


def raw_field(raw: str | Column, field_name: str) -> Column:
    """The value of the top-level field ``field_name`` of a raw JSON line, as text: from the
    parsed line, or, for a line that does not parse, from its ``"field": "value"`` text
    (a line cut short keeps what it has). NULL when the line holds no such field."""
    line = F.col(raw) if isinstance(raw, str) else raw
    name = validate_identifier(field_name, "subject field")
    unparsed = F.regexp_extract(line, rf'"{name}"\s*:\s*"([^"\\]*)"', 1)
    return F.coalesce(
        F.get_json_object(line, f"$.{name}"),
        F.when(F.get_json_object(line, "$").isNull() & (unparsed != ""), unparsed),
    )


def subject_values(table_columns: Iterable[str], subjects: Subjects) -> list[Column]:
    """The values a table's row holds in the subject columns and fields: its typed subject
    columns, and the declared fields of its raw line."""
    columns = list(table_columns)
    values = [F.col(c) for c in subjects.holding_columns(columns)]
    if RAW_COLUMN in columns:
        values += [raw_field(RAW_COLUMN, name) for name in subjects.column_names]
    return values


def subject_rows(
    table_columns: Iterable[str], subjects: Subjects, subject: str | Column
) -> Column | None:
    """The condition that picks a subject's rows of a table with ``table_columns``: one of its
    subject columns, or one of the declared fields of its raw line, equals the id (a string,
    or a column such as a one-row source's in a MERGE, which keeps the id out of the
    condition Delta records). None when the table can hold no subject row."""
    value = F.lit(subject) if isinstance(subject, str) else subject
    conditions = [column == value for column in subject_values(table_columns, subjects)]
    if not conditions:
        return None
    return F.coalesce(reduce(lambda a, b: a | b, conditions), F.lit(False))


def legacy_salted_hash(subject: str, salt: str) -> str:
    """The salted SHA-256 of an id, hex: what erasures before the erasure key logged (the
    salt was kept in the lake; docs/governance.md, moving a lake to a key)."""
    return hashlib.sha256((salt + subject).encode("utf-8")).hexdigest()


def legacy_hashed(column: str | Column, salt: str) -> Column:
    """:func:`legacy_salted_hash` of a string column (a name or a Column), on the executors."""
    return F.sha2(F.concat(F.lit(salt), F.col(column) if isinstance(column, str) else column), 256)


def _sql_literal(value: object) -> str:
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            raise ValueError(f"a scope value must be naive (the session's UTC): {value!r}")
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | Decimal):
        return str(value)
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    raise ValueError(f"a scope value of type {type(value).__name__} has no SQL literal here")


def scope_predicate(scope: str, values: Iterable[object]) -> str:
    """The SQL predicate ``scope IN (values)`` (a ``replaceWhere`` of the recomputed rows).

    >>> scope_predicate("event_date", [date(2026, 1, 2), date(2026, 1, 1)])
    "`event_date` IN (DATE '2026-01-01', DATE '2026-01-02')"
    >>> scope_predicate("window_start", [datetime(2026, 1, 1, 10)])
    "`window_start` IN (TIMESTAMP '2026-01-01 10:00:00')"
    """
    literals = sorted({_sql_literal(v) for v in values if v is not None})
    if not literals:
        raise ValueError(f"no value of {scope} to recompute")
    return f"{quote_identifier(scope)} IN ({', '.join(literals)})"
