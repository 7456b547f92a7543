"""Run small, latency-bound Spark or catalog calls from a few threads."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def in_parallel(work: Callable[[T], R], items: Iterable[T], name: str = "medallion") -> list[R]:
    """``work`` over ``items`` from 4 threads, results in order.

    For calls that wait on the file system or a small Spark job (table versions, counts,
    CREATE TABLE, catalog registration): their latency, not the cores, is what adds up.
    """
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix=name) as pool:
        return list(pool.map(work, items))
