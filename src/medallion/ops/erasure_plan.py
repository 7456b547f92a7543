"""What erasing a data subject would touch: each table's rows that belong to the subject, and
each recomputed gold aggregate's scope (issue 29, erasure: the first step, read-only).

The plan reads the lake and changes nothing. The erasure that carries it out (deletes under
the streams' locks, the recomputes, the erasure log) builds on it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from medallion.config import Config
from medallion.declarations import Pipeline, Table
from medallion.deployment import pipelines_of
from medallion.sql_names import TableRef
from medallion.subjects import Subjects, subject_rows
from medallion.tables import read_table, table_exists


@dataclass(frozen=True)
class TableErasure:
    """One table of an erasure: the subject's rows in it (``rows``), or, for a gold aggregate
    recomputed in the subject's scope, the scope values (``scope``) and its rows in them."""

    pipeline: str
    table: str
    rows: int
    scope: tuple = ()

    @property
    def touched(self) -> bool:
        """Whether the erasure removes or recomputes rows here."""
        return bool(self.rows or self.scope)

    def describe(self) -> str:
        """One line for people."""
        if self.scope:
            return f"{self.table}: {self.rows} rows in {len(self.scope)} scope values recomputed"
        return f"{self.table}: {self.rows} rows removed"


@dataclass(frozen=True)
class ErasureResult:
    """What an erasure removed (or, in a dry run, would), table by table."""

    subject_hash: str | None
    erasure_id: int | None
    tables: tuple[TableErasure, ...]
    promoted: int = 0
    vacuumed_files: int | None = None  # None: no VACUUM asked for
    suppressed_only: bool = False  # nothing was found: recorded as a suppression alone

    def as_json(self) -> dict:
        return asdict(self) | {"tables": [asdict(t) | {"scope": len(t.scope)} for t in self.tables]}

    def describe(self, dry_run: bool) -> str:
        """Lines for people: one per table with the subject's rows."""
        touched = [t for t in self.tables if t.touched]
        if self.suppressed_only:
            return (
                f"erasure {self.erasure_id}: nothing was found to erase; recorded as a "
                "suppression alone: the subject's lines that land from now on are dropped"
            )
        if dry_run:
            head = f"would erase the subject from {len(touched)} tables (dry run; nothing written)"
        else:
            head = f"erasure {self.erasure_id}: the subject is gone from {len(touched)} tables"
            if self.promoted:
                head += f"; {self.promoted} re-sent copies of its keys took their place in silver"
            if self.vacuumed_files is not None:
                head += f"; VACUUM deleted {self.vacuumed_files} files"
        return "\n".join([head, *(f"  {t.describe()}" for t in touched)])


def subject_tables(
    spark: SparkSession, config: Config
) -> Iterator[tuple[Pipeline, Table, TableRef, Subjects]]:
    """The existing tables of ``config``'s pipelines that declare subjects, in the pipelines'
    declared order, each with its pipeline, place and subjects."""
    for pipeline in pipelines_of(config):
        if pipeline.subjects is None:
            continue
        for table in pipeline.tables:
            ref = config.table(table.key)
            if table_exists(spark, ref):
                yield pipeline, table, ref, pipeline.subjects


def erasure_plan(spark: SparkSession, config: Config, subject: str) -> list[TableErasure]:
    """The tables of ``config``'s pipelines that hold ``subject``'s data, and how much of it,
    in the pipelines' declared order; a pipeline without subjects, and tables not yet
    created, are left out."""
    if not subject:
        raise ValueError("the subject's id is empty")
    plan = []
    for pipeline, table, ref, subjects in subject_tables(spark, config):
        recompute = subjects.recompute_of(table.key)
        if recompute is not None:
            scope = scope_values(spark, config, subjects, table.key, subject)
            rows = read_table(spark, ref).where(F.col(recompute.scope).isin(list(scope)))
            plan.append(TableErasure(pipeline.name, table.key, rows.count(), scope))
            continue
        frame = read_table(spark, ref)
        condition = subject_rows(frame.columns, subjects, subject)
        if condition is not None:
            plan.append(TableErasure(pipeline.name, table.key, frame.where(condition).count()))
    return plan


def subject_found(spark: SparkSession, config: Config, subject: str) -> bool:
    """Whether a table of ``config``'s pipelines holds a row of ``subject``: what
    :func:`erasure_plan` would find touched, stopping at the first table that holds one. A
    recomputed aggregate needs no look: its scope comes from its source's subject rows."""
    for _, _, ref, subjects in subject_tables(spark, config):
        frame = read_table(spark, ref)
        condition = subject_rows(frame.columns, subjects, subject)
        if condition is not None and not frame.where(condition).isEmpty():
            return True
    return False


def scope_values(
    spark: SparkSession, config: Config, subjects: Subjects, table_key: str, subject: str
) -> tuple:
    """The values of ``table_key``'s scope column that the subject's rows of its source fall
    in, sorted (the hours, the days to recompute)."""
    recompute = subjects.recompute_of(table_key)
    if recompute is None:
        raise ValueError(f"{table_key} is not declared recomputed")
    source = read_table(spark, config.table(recompute.source))
    condition = subject_rows(source.columns, subjects, subject)
    scoped = recompute.scoped(source.where(condition))
    values = scoped.select(recompute.scope).distinct().collect()
    return tuple(sorted(row[0] for row in values if row[0] is not None))
