"""Expectations in a stream: each validated batch measured against its contract's rules, the
``fail`` action applied before anything is written, and the counts recorded in the
data-quality log, ``<lake>/_system/data_quality``, as one of the batch's writes (exactly once,
streams/exactly_once.py).

A log row is one rule of one batch: the stream, the batch id, the dataset and its silver table,
silver's version when the batch was validated (the batch's own writes follow it), the rule,
its action, and how many of the batch's rows passed and failed it. The log's append runs beside
the batch's other writes, so it costs the batch no time of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.column_stages import built_once
from medallion.config import Config
from medallion.contract_rules import Contract
from medallion.expectations import FAILED_RULES, Expectations, expectations_of
from medallion.parallel import side_by_side
from medallion.quality_log import QUALITY_SCHEMA, quality_table
from medallion.storage import local_path
from medallion.streams.exactly_once import BatchWrites
from medallion.tables import rows_frame, table_version

# How many of the failing lines an ExpectationFailedError names (by where they landed: their
# values are never quoted, they may be personal data).
SAMPLE_LINES = 2


def line_location(source: str | None, raw: str | None) -> str:
    """Where a raw line landed, without its values: ``<file> line <n>`` (the first line of
    the file equal to it, when the file can be read here), or a Kafka record's address."""
    if not source:
        return "a line of unknown origin"
    path = local_path(source)
    if path is None or raw is None:
        return source
    try:
        with open(path, encoding="utf-8", errors="replace", newline="") as handle:
            for number, line in enumerate(handle, start=1):
                if line.rstrip("\r\n") == raw or line.rstrip("\n") == raw:
                    return f"{path} line {number}"
    except OSError:
        pass
    return path


class ExpectationFailedError(RuntimeError):
    """A rule set to ``fail`` was broken by more of a batch's rows than its threshold allows:
    the stream stopped before the batch wrote anything."""


@dataclass(frozen=True)
class BatchQuality:
    """How many of a batch's rows broke each rule (every rule of the contract, 0 included)."""

    rows: int
    failed: dict[str, int]
    table_version: int | None  # the silver table's version when the batch was measured


@built_once
def _rule_counts(names: tuple[str, ...]) -> list[Column]:
    failed = F.col(FAILED_RULES)
    return [F.count(F.lit(1)), *[F.count_if(F.array_contains(failed, n)) for n in names]]


class QualityGate:
    """One stream's expectations over one dataset: :meth:`measure` each validated batch (rows
    with :data:`~medallion.expectations.FAILED_RULES`), :meth:`check` it before writing, then
    :meth:`record` it beside the batch's writes (:meth:`record_beside`)."""

    def __init__(self, config: Config, stream: str, contract: Contract, table_key: str) -> None:
        self.stream = stream
        self.contract = contract
        self.expectations: Expectations = expectations_of(contract, config.settings)
        self.table = config.table(table_key)
        self.log = quality_table(config)

    def measure(self, validated: DataFrame, *more: Column) -> tuple[BatchQuality, list[Any]]:
        """Each rule's failures, and the values of the aggregates ``more``, in one Spark job."""
        names = self.contract.rule_names
        row = validated.agg(*more, *_rule_counts(names)).first()
        assert row is not None
        values = list(row)
        counts = values[len(more) :]
        failed = dict(zip(names, map(int, counts[1:]), strict=True))
        version = table_version(validated.sparkSession, self.table)
        return BatchQuality(int(counts[0]), failed, version), values[: len(more)]

    def check(self, validated: DataFrame, quality: BatchQuality) -> None:
        """Raise :class:`ExpectationFailedError` when a rule set to ``fail`` was broken by
        more of the batch's rows than its threshold allows."""
        for rule, threshold in self.expectations.failing:
            broken = quality.failed[rule]
            if broken and Decimal(broken) > threshold * quality.rows:
                raise ExpectationFailedError(self._failure(validated, rule, broken, quality.rows))

    def _failure(self, validated: DataFrame, rule: str, broken: int, rows: int) -> str:
        lines = (
            validated.where(F.array_contains(F.col(FAILED_RULES), rule))
            .select("_source_file", "_raw")
            .limit(SAMPLE_LINES)
            .collect()
        )
        sample = "; ".join(line_location(row._source_file, row._raw) for row in lines)
        threshold = dict(self.expectations.failing)[rule]
        return (
            f"expectation {self.contract.dataset}.{rule} failed: {broken} of {rows} rows broke "
            f"it (more than {threshold:%} allowed), so {self.stream} stopped before writing; "
            f"fix the input or the rule's action (docs/governance.md). For example: {sample}"
        )

    def record(self, writes: BatchWrites, quality: BatchQuality, app_id: str) -> None:
        """Append the batch's counts to the data-quality log, as ``app_id``'s write of it."""
        spark: SparkSession = writes.spark
        now = datetime.now(timezone.utc)
        rows = [
            {
                "stream": self.stream,
                "batch_id": writes.batch_id,
                "dataset": self.contract.dataset,
                "table_name": self.table.key,
                "table_version": quality.table_version,
                "rule": rule,
                "action": self.expectations.action(rule),
                "passed": quality.rows - failed,
                "failed": failed,
                "recorded_at": now,
            }
            for rule, failed in quality.failed.items()
        ]
        writes.append(rows_frame(spark, rows, QUALITY_SCHEMA), self.log, app_id)

    def record_beside(
        self, writes: BatchWrites, quality: BatchQuality, app_id: str, write: Callable[[], None]
    ) -> None:
        """Run the batch's ``write`` and :meth:`record` side by side: the log's commit does
        not hold the batch up."""
        side_by_side([write, lambda: self.record(writes, quality, app_id)])
