"""Run small, latency-bound Spark or catalog calls from a few threads, and a batch's writes side by
side."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
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


def side_by_side(work: Sequence[Callable[[], None]]) -> None:
    """Run each callable in a thread of its own and wait for all of them; then raise the first
    failure, if any (no write is left running when a batch fails).

    >>> done = []
    >>> side_by_side([lambda: done.append(1), lambda: done.append(2)]); sorted(done)
    [1, 2]
    """
    if len(work) == 1:
        work[0]()
        return
    with ThreadPoolExecutor(max_workers=len(work), thread_name_prefix="medallion-batch") as pool:
        futures = [pool.submit(task) for task in work]
        wait(futures)
    for future in futures:
        future.result()
