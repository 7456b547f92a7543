"""Expectations in a stream: each validated batch measured against its contract's rules, the
``fail`` action applied before anything is written, and the counts recorded in the
data-quality log, ``<lake>/_system/data_quality``, as one of the batch's writes (exactly once,
streams/exactly_once.py).

A log row is one rule of one batch: the stream, the batch id, the dataset and its silver table,
silver's version once the batch's writes committed, the rule, its action, and how many of the
batch's rows passed and failed it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.config import Config
from medallion.expectations import FAILED_RULES, Contract, Expectations, expectations_of
from medallion.quality_log import QUALITY_SCHEMA, quality_table
from medallion.streams.exactly_once import BatchWrites
from medallion.tables import table_version

# How many of the failing lines an ExpectationFailedError quotes, and how much of each.
SAMPLE_LINES, SAMPLE_CHARACTERS = 2, 160


class ExpectationFailedError(RuntimeError):
    """A rule set to ``fail`` was broken by more of a batch's rows than its threshold allows:
    the stream stopped before the batch wrote anything."""


@dataclass(frozen=True)
class BatchQuality:
    """How many of a batch's rows broke each rule (every rule of the contract, 0 included)."""

    rows: int
    failed: dict[str, int]


class QualityGate:
    """One stream's expectations over one dataset: :meth:`measure` each validated batch (rows
    with :data:`~medallion.expectations.FAILED_RULES`), then :meth:`record` it once the batch
    has written ``table``."""

    def __init__(self, config: Config, stream: str, contract: Contract, table_key: str) -> None:
        self.stream = stream
        self.contract = contract
        self.expectations: Expectations = expectations_of(contract, config.settings)
        self.table = config.table(table_key)
        self.log = quality_table(config)

    def measure(self, validated: DataFrame) -> BatchQuality:
        """Count each rule's failures in one Spark job; raise :class:`ExpectationFailedError` when a
        ``fail`` rule is broken beyond its threshold."""
        names = self.contract.rule_names
        failed = F.col(FAILED_RULES)
        counts = validated.agg(
            F.count(F.lit(1)), *[F.count_if(F.array_contains(failed, n)) for n in names]
        ).first()
        assert counts is not None
        quality = BatchQuality(int(counts[0]), dict(zip(names, map(int, counts[1:]), strict=True)))
        for rule, threshold in self.expectations.failing:
            broken = quality.failed[rule]
            if broken and Decimal(broken) > threshold * quality.rows:
                raise ExpectationFailedError(self._failure(validated, rule, broken, quality.rows))
        return quality

    def _failure(self, validated: DataFrame, rule: str, broken: int, rows: int) -> str:
        lines = (
            validated.where(F.array_contains(F.col(FAILED_RULES), rule))
            .select(F.substring("_raw", 1, SAMPLE_CHARACTERS).alias("line"))
            .limit(SAMPLE_LINES)
            .collect()
        )
        sample = "; ".join(repr(row.line) for row in lines)
        threshold = dict(self.expectations.failing)[rule]
        return (
            f"expectation {self.contract.dataset}.{rule} failed: {broken} of {rows} rows broke "
            f"it (more than {threshold:%} allowed), so {self.stream} stopped before writing; "
            f"fix the input or the rule's action (docs/governance.md). Sample: {sample}"
        )

    def record(self, writes: BatchWrites, quality: BatchQuality, app_id: str) -> None:
        """Append the batch's counts to the data-quality log, as ``app_id``'s write of it."""
        spark: SparkSession = writes.spark
        version = table_version(spark, self.table)
        now = datetime.now(timezone.utc)
        rows = [
            (
                self.stream,
                writes.batch_id,
                self.contract.dataset,
                self.table.key,
                version,
                rule,
                self.expectations.action(rule),
                quality.rows - failed,
                failed,
                now,
            )
            for rule, failed in quality.failed.items()
        ]
        writes.append(spark.createDataFrame(rows, QUALITY_SCHEMA), self.log, app_id)
