"""Columns built once per JVM and added to a DataFrame in stages."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TypeVar

from pyspark import SparkContext
from pyspark.sql import Column, DataFrame

T = TypeVar("T")


def _jvm_identity() -> int:
    """Which JVM the Columns built now belong to (one value over Spark Connect, whose Columns
    hold no JVM object)."""
    return id(SparkContext._active_spark_context)


def built_once(build: Callable[..., T]) -> Callable[..., T]:
    """``build`` run once per JVM and per arguments (hashable ones), its Columns kept.

    A stream validates every batch with the same few hundred expressions; built through Py4J
    they take longer than a small batch takes to validate. A Column is an expression bound to
    no DataFrame, so the next batch can use it again.
    """

    @functools.lru_cache(maxsize=64)
    def cached(_jvm: int, *args: object) -> T:
        return build(*args)

    @functools.wraps(build)
    def once(*args: object) -> T:
        return cached(_jvm_identity(), *args)

    return once


def apply_stages(df: DataFrame, stages: Sequence[Sequence[Column]]) -> DataFrame:
    """``df`` with each stage's columns added in turn. Separate projections, so each value is
    computed once: Spark does not merge projections that would repeat costly expressions."""
    for stage in stages:
        df = df.select("*", *stage)
    return df
