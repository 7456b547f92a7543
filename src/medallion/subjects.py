"""Data subjects: which columns of a pipeline identify a person, which rows of each table
belong to one, and how the gold aggregates that name nobody are recomputed without them.

A pipeline declares :class:`Subjects` (issue 29, erasure; docs/governance.md). The engine
names no column: a table holds a subject's rows where it has one of the declared columns, or,
for a table of raw lines (bronze, a quarantine: ``_raw``), where the line holds the subject's
id as a JSON string value, malformed lines included. A gold aggregate that has neither is
declared a :class:`Recompute`: its rows in the subject's scope (the hours, the days their
records fell in) are computed again from silver once the subject's silver rows are gone.

>>> Subjects({"events": "user_id", "customers": "customer_id"}).column_names
('customer_id', 'user_id')
>>> json_string_literal('u-1"x')
'"u-1\\\\"x"'
"""

from __future__ import annotations

import hashlib
import json
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


def json_string_literal(subject: str) -> str:
    """The subject's id as a JSON string, as it appears in a line that holds it."""
    return json.dumps(subject, ensure_ascii=False)


def subject_rows(table_columns: Iterable[str], subjects: Subjects, subject: str) -> Column | None:
    """The condition that picks a subject's rows of a table with ``table_columns``: one of its
    subject columns equals the id, or its raw line holds the id as a JSON string value. None
    when the table can hold no subject row (no subject column and no raw line).

    A line that holds the id as the value of another field is the subject's too: a raw line
    is removed whole, never edited.
    """
    columns = list(table_columns)
    conditions = [F.col(c) == F.lit(subject) for c in subjects.holding_columns(columns)]
    if RAW_COLUMN in columns:
        conditions.append(F.col(RAW_COLUMN).contains(json_string_literal(subject)))
    if not conditions:
        return None
    return F.coalesce(reduce(lambda a, b: a | b, conditions), F.lit(False))


def subject_hash(subject: str, salt: str) -> str:
    """The salted SHA-256 of an id, hex: what the erasure log keeps instead of the id (the same
    as :func:`hashed` in Spark)."""
    return hashlib.sha256((salt + subject).encode("utf-8")).hexdigest()


def hashed(column: str | Column, salt: str) -> Column:
    """:func:`subject_hash` of a string column (a name or a Column), on the executors."""
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
