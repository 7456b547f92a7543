"""The keys a table holds, in memory, so that a batch finds its new keys without reading the
table: a stream's cost per batch then follows the batch, not the table's history.

silver/events holds one row per ``event_id``, and gold/hourly_product_users one per (hour,
product, user). Each batch must learn which of its keys the table already holds. Reading the
table's key column for that grows with its history; instead, a stream reads the keys once, when
it starts, into a :class:`KeyIndex`, and adds each batch's new keys after it appended them.

A key is held as two 64-bit hashes (``xxhash64`` of the key columns, without and with a salt):
128 bits, so two different keys of even a billion-row table share both hashes with a chance
below 10^-20, far below that of an undetected disk error. The index is exact for the table as
it was read plus what the stream appended: the stream is the table's one writer (its lock), and
a stream that fails or restarts reads the table again.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.config import TableRef
from medallion.tables import read_table

HASH_COLUMNS = ("__key_h1", "__key_h2")
_SALT = "medallion:key"


def key_hashes(columns: Sequence[str]) -> list[Column]:
    """The two hash columns of a key made of ``columns`` (named :data:`HASH_COLUMNS`)."""
    keys = [F.col(c) for c in columns]
    return [
        F.xxhash64(*keys).alias(HASH_COLUMNS[0]),
        F.xxhash64(F.lit(_SALT), *keys).alias(HASH_COLUMNS[1]),
    ]


class KeyIndex:
    """A set of keys, each as its two 64-bit hashes, in a few sorted runs (numpy).

    Membership is a binary search per run. A new run is merged into the one before it while
    it is at least half its size, so there are at most log2(n) runs and a key is re-sorted
    O(log n) times in all.
    """

    def __init__(self) -> None:
        self._runs: list[tuple[np.ndarray, np.ndarray]] = []

    def __len__(self) -> int:
        return sum(len(h1) for h1, _ in self._runs)

    def add(self, h1: np.ndarray, h2: np.ndarray) -> None:
        """Add keys (not already held)."""
        if len(h1):
            self._runs.append(_sorted(h1, h2))
        while len(self._runs) > 1 and 2 * len(self._runs[-1][0]) >= len(self._runs[-2][0]):
            (b1, b2), (a1, a2) = self._runs.pop(), self._runs.pop()
            self._runs.append(_sorted(np.concatenate([a1, b1]), np.concatenate([a2, b2])))

    def contains(self, h1: np.ndarray, h2: np.ndarray) -> np.ndarray:
        """For each key, whether the index holds it."""
        found = np.zeros(len(h1), dtype=bool)
        for run1, run2 in self._runs:
            left = np.searchsorted(run1, h1, "left")
            right = np.searchsorted(run1, h1, "right")
            one = (right - left) == 1
            found[one] |= run2[left[one]] == h2[one]
            # Keys whose first hash several held keys share: compare each.
            for i in np.nonzero((right - left) > 1)[0]:
                found[i] |= bool(np.any(run2[left[i] : right[i]] == h2[i]))
        return found


def _sorted(h1: np.ndarray, h2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((h2, h1))
    return h1[order], h2[order]


def _hash_arrays(df: DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The two hash columns of ``df`` in the driver."""
    table = df.select(*HASH_COLUMNS).toArrow()
    return tuple(  # type: ignore[return-value]
        table.column(name).to_numpy().astype(np.int64, copy=False) for name in HASH_COLUMNS
    )


class KnownKeys:
    """The keys ``columns`` that ``table`` holds, read when first needed and then kept up to
    date by the one stream that writes the table: :meth:`new_rows`, then :meth:`added`."""

    def __init__(self, table: TableRef, columns: Sequence[str]) -> None:
        self.table, self.columns = table, tuple(columns)
        self._index: KeyIndex | None = None

    def _known(self, spark: SparkSession) -> KeyIndex:
        if self._index is None:
            index = KeyIndex()
            index.add(
                *_hash_arrays(read_table(spark, self.table).select(*key_hashes(self.columns)))
            )
            self._index = index
        return self._index

    def new_rows(
        self, spark: SparkSession, rows: DataFrame
    ) -> tuple[DataFrame, tuple[np.ndarray, np.ndarray]]:
        """The ``rows`` (one per key) whose key the table does not hold, with
        :data:`HASH_COLUMNS` added, and those rows' hashes for :meth:`added`. Cache ``rows``:
        they are read twice."""
        hashed = rows.select("*", *key_hashes(self.columns))
        h1, h2 = _hash_arrays(hashed)
        held = self._known(spark).contains(h1, h2)
        if not held.any():
            return hashed, (h1, h2)
        import pyarrow as pa

        seen = spark.createDataFrame(
            pa.table({HASH_COLUMNS[0]: h1[held], HASH_COLUMNS[1]: h2[held]})
        )
        unseen = hashed.join(F.broadcast(seen), list(HASH_COLUMNS), "left_anti")
        return unseen, (h1[~held], h2[~held])

    def added(self, hashes: tuple[np.ndarray, np.ndarray]) -> None:
        """Record keys the stream has appended to the table (from :meth:`new_rows`)."""
        if self._index is not None:
            self._index.add(*hashes)
