"""A landed dataset declared at once from its contract: its tables, its validation and the flows
that fill them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from medallion.contract_rules import Contract
from medallion.contracts import Check, field_text, field_value
from medallion.declarations import Flow, Landing, QuarantineReplay, Table
from medallion.pipelines.blocks.append import Enrichment, ValidatedAppend
from medallion.pipelines.blocks.tables import (
    bronze_append,
    bronze_table,
    quarantine_table,
    silver_table,
    validator,
)


@dataclass(frozen=True)
class Dataset:
    """The dataset ``contract`` names, as it lands: ``bronze`` keeps every line (the
    ``free_text`` fields too, as text), ``quarantine`` the refused ones with their first
    ``key`` field, ``validate`` judges them, and ``bronze_flow`` (``bronze_<dataset>``) appends
    every landed line to bronze. Its silver flow is the pipeline's (``silver_flow``)."""

    contract: Contract
    key: tuple[str, ...]
    free_text: tuple[str, ...] = ()
    bronze: Table = field(init=False)
    quarantine: Table = field(init=False)
    validate: Callable[..., DataFrame] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "bronze", bronze_table(self.contract, self.free_text))
        object.__setattr__(self, "quarantine", quarantine_table(self.contract, self.key[0]))
        object.__setattr__(self, "validate", validator(self.contract, self.free_text))

    @property
    def name(self) -> str:
        """The dataset's name, its landing folder's and its topic's."""
        return self.contract.dataset

    @cached_property
    def bronze_flow(self) -> Flow:
        start = bronze_append(self.contract, self.free_text)
        return Flow(f"bronze_{self.name}", "bronze", Landing(self.name), (self.bronze,), start)

    def silver_flow(
        self,
        outputs: tuple[Table, ...],
        batch: Callable[..., object],
        joins: tuple[Table, ...] = (),
    ) -> Flow:
        """The flow ``silver_<dataset>``: bronze's rows to ``outputs`` by ``batch``."""
        return Flow(f"silver_{self.name}", "silver", self.bronze, outputs, joins=joins, batch=batch)

    def replay(self, flow: str) -> QuarantineReplay:
        """How ``medallion quarantine replay`` checks the quarantine again, for ``flow``."""
        return QuarantineReplay(self.quarantine, flow, self.name, self.validate)


@dataclass(frozen=True)
class ValidatedDataset(Dataset):
    """A :class:`Dataset` whose silver keeps each valid record once per ``key`` (a
    :class:`~medallion.pipelines.blocks.append.ValidatedAppend`): ``tables`` are bronze,
    ``silver`` and the quarantine, ``flows`` the bronze one and ``append_flow``.

    ``silver`` defaults to the contract's typed fields, Z-ordered by ``key``; ``columns`` and
    ``enrich`` are the append's, ``joins`` the silver flow's static reads."""

    silver: Table | None = None
    columns: tuple[str, ...] = ()
    enrich: Enrichment | None = None
    joins: tuple[Table, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.silver is None:
            object.__setattr__(self, "silver", silver_table(self.contract, zorder=self.key))

    @property
    def tables(self) -> tuple[Table, ...]:
        return (self.bronze, self.silver, self.quarantine)

    @cached_property
    def append_flow(self) -> Flow:
        """``silver_<dataset>``: the valid records to silver, the refused to the quarantine."""
        silver, quarantine = self.silver, self.quarantine
        append = ValidatedAppend(
            self.contract, self.validate, silver, quarantine, self.key, self.columns, self.enrich
        )
        return self.silver_flow((silver, quarantine), append, self.joins)

    @property
    def flows(self) -> tuple[Flow, Flow]:
        return self.bronze_flow, self.append_flow


def range_check(name: str, low: float, high: float) -> Check:
    """The rule ``<name>_in_range``: field ``name``, when it is a number, is from ``low`` to
    ``high``; the reason quotes it."""

    def build() -> tuple[Column, Column]:
        value = field_value(name)
        return (
            F.coalesce((value < low) | (value > high), F.lit(False)),
            F.concat(F.lit(f"{name} is outside {low}..{high}: "), field_text(name)),
        )

    return Check(f"{name}_in_range", build)


def pattern_check(name: str, field_name: str, pattern: str, what: str) -> Check:
    """The rule ``name``: field ``field_name``, when it holds text, matches the regular
    expression ``pattern``; the reason says it is not ``what`` and quotes it (64 characters)."""

    def build() -> tuple[Column, Column]:
        text = field_text(field_name)
        return (
            F.coalesce(~text.rlike(pattern) & (F.length(F.trim(text)) > 0), F.lit(False)),
            F.concat(F.lit(f"{field_name} is not {what}: "), F.substring(text, 1, 64)),
        )

    return Check(name, build)
