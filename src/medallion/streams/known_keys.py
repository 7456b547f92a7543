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
a stream that fails or restarts reads the table again, or the index it kept in its checkpoint
when the table's log shows that no key changed since (key_index_store.py).

The index holds at most ``MEDALLION_KEY_INDEX_MEMORY_MB`` in memory; the rest of it is in files
the process maps (key_index.py). Reading a large table's keys is bounded too: the executors
write the keys' hashes into buckets by hash range, and the driver sorts one bucket at a time
into a single run.
"""

from __future__ import annotations

import logging
import math
import shutil
import tempfile
import uuid
import weakref
from collections.abc import Iterator, Sequence

import numpy as np
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.delta_log import commits_after, committed_version, holds_no_files, table_id
from medallion.sql_names import TableRef
from medallion.storage import delete_folder, local_path
from medallion.streams.key_index import KEY_BYTES, KeyIndex, Run, sorted_run, write_run
from medallion.streams.key_index_store import READ_SCRATCH_PREFIX, KeyIndexStore
from medallion.tables import read_table, row_count

log = logging.getLogger(__name__)

HASH_COLUMNS = ("__key_h1", "__key_h2")
_SALT = "medallion:key"
_BUCKET = "__key_bucket"
# The most keys sent to a batch's join as a broadcast (4 MiB of hashes). A broadcast is built
# in the driver's heap: a 10M-event backfill's batch of 1.5M held keys (25 MB) ran a 1 GiB
# driver out of memory; more keys than this are joined by a shuffle instead.
BROADCAST_KEYS = 250_000
# Memory a key takes while a table's keys are read: the Arrow table, its numpy copy, the sort.
_READ_BYTES_PER_KEY = 3 * KEY_BYTES


def key_hashes(columns: Sequence[str]) -> list[Column]:
    """The two hash columns of a key made of ``columns`` (named :data:`HASH_COLUMNS`)."""
    keys = [F.col(c) for c in columns]
    return [
        F.xxhash64(*keys).alias(HASH_COLUMNS[0]),
        F.xxhash64(F.lit(_SALT), *keys).alias(HASH_COLUMNS[1]),
    ]


def _hash_arrays(df: DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The two hash columns of ``df`` in the driver."""
    table = df.select(*HASH_COLUMNS).toArrow()
    return tuple(  # type: ignore[return-value]
        table.column(name).to_numpy().astype(np.int64, copy=False) for name in HASH_COLUMNS
    )


def _buckets_for(keys: int, memory_bytes: int) -> int:
    """How many buckets a read of ``keys`` keys takes to fit ``memory_bytes``: a power of 2."""
    needed = keys * _READ_BYTES_PER_KEY / memory_bytes
    return 1 if needed <= 1 else 2 ** math.ceil(math.log2(needed))


def kept_keys(checkpoint: str, table: TableRef) -> str:
    """Where a stream keeps its index of ``table``'s keys: in its checkpoint folder, which a
    reset of the stream deletes with it."""
    return f"{checkpoint.rstrip('/')}/_medallion_keys/{table.key.replace('/', '.')}"


class KnownKeys:
    """The keys ``columns`` that ``table`` holds, read when first needed and then kept up to
    date by the one stream that writes the table: :meth:`new_rows`, then :meth:`added`.

    With a local ``folder`` (in the stream's checkpoint), the index is also kept there after
    each write, and a new process reads it back rather than the table, as long as the table's
    log shows that its keys have not changed since (key_index_store.py).
    """

    def __init__(self, table: TableRef, columns: Sequence[str], folder: str | None = None) -> None:
        self.table, self.columns = table, tuple(columns)
        self._folder = folder
        local = local_path(folder) if folder is not None else None
        self._store = KeyIndexStore(local, columns) if local is not None else None
        self._spill: str | None = local
        self._index: KeyIndex | None = None
        # The table version and id the index reflects; None: not known, so it is not kept.
        self._version: int | None = None
        self._table_id: str | None = None

    def _spill_folder(self) -> str:
        """The local folder of the index's files: the kept index's, else a temporary one
        (a checkpoint on remote storage), deleted with this object."""
        if self._spill is None:
            self._spill = tempfile.mkdtemp(prefix="medallion-keys-")
            weakref.finalize(self, shutil.rmtree, self._spill, True)
        return self._spill

    def _known(self, spark: SparkSession) -> KeyIndex:
        if self._index is None:
            kept = self._store.load(spark, self.table) if self._store is not None else None
            if kept is not None:
                runs, self._version, self._table_id = kept
                self._index = KeyIndex(runs, self._spill_folder())
            else:
                self._index = self._read(spark)
                self._save()
        return self._index

    def _read(self, spark: SparkSession) -> KeyIndex:
        """The keys of the table's latest version, read from the table."""
        try:
            self._version = committed_version(spark, self.table)
        except LookupError:
            self._version = None  # a catalog table: read its latest version, keep nothing
        index = KeyIndex(folder=self._spill_folder())
        if self._version is not None:
            self._table_id = table_id(spark, self.table, self._version)
            if holds_no_files(spark, self.table, self._version):
                return index  # a table just created: its log says it holds no keys
        rows = read_table(spark, self.table, self._version)
        hashed = rows.select(*key_hashes(self.columns))
        # Without a folder Spark can write the buckets in, the keys are read in one piece.
        buckets = (
            _buckets_for(row_count(spark, self.table), index.memory_bytes)
            if self._folder is not None
            else 1
        )
        if buckets == 1:
            index.add(*_hash_arrays(hashed))
        else:
            index.runs.append(self._read_in_buckets(spark, hashed, buckets))
        return index

    def _read_in_buckets(self, spark: SparkSession, hashed: DataFrame, buckets: int) -> Run:
        """The table's keys as one run, written from ``buckets`` ranges of the first hash,
        each read and sorted on its own, so the driver holds one bucket at a time."""
        assert self._folder is not None
        scratch = f"{self._folder.rstrip('/')}/{READ_SCRATCH_PREFIX}{uuid.uuid4().hex}"
        shift = 64 - int(math.log2(buckets))
        try:
            hashed.withColumn(_BUCKET, F.shiftright(HASH_COLUMNS[0], shift)).write.partitionBy(
                _BUCKET
            ).parquet(scratch)
            written = spark.read.parquet(scratch)
            sizes = {r[_BUCKET]: r["count"] for r in written.groupBy(_BUCKET).count().collect()}

            def parts() -> Iterator[Run]:
                # An arithmetic shift keeps the signed order: bucket -b/2 holds the smallest.
                for bucket in sorted(sizes):
                    yield sorted_run(*_hash_arrays(written.where(F.col(_BUCKET) == bucket)))

            keys = sum(sizes.values())
            log.info("%s: %d keys read in %d buckets", self.table.key, keys, buckets)
            return write_run(self._spill_folder(), parts(), keys)
        finally:
            delete_folder(spark, scratch)

    @property
    def _keeping(self) -> bool:
        return self._store is not None and None not in (self._version, self._table_id)

    def _save(self) -> None:
        if not self._keeping or self._index is None:
            return
        assert self._store is not None and self._version is not None and self._table_id
        try:
            self._store.save(self._index.runs, self._version, self._table_id)
        except OSError:
            # Harmless: the index kept before stays valid only for versions before this
            # stream's write, so the next process reads the keys from the table.
            log.warning("could not keep the key index of %s", self.table.key, exc_info=True)

    def new_rows(
        self, spark: SparkSession, rows: DataFrame
    ) -> tuple[DataFrame, tuple[np.ndarray, np.ndarray]]:
        """The ``rows`` (one per key) whose key the table does not hold, and those rows'
        hashes for :meth:`added`. Cache ``rows``: they are read twice. When the table holds
        none of their keys (a fresh table, most of a backfill) the result is ``rows`` itself,
        so that its cache serves the write and nothing is cached twice."""
        hashed = rows.select("*", *key_hashes(self.columns))
        h1, h2 = _hash_arrays(hashed)
        held = self._known(spark).contains(h1, h2)
        if not held.any():
            return rows, (h1, h2)
        # deferred: loads pyarrow
        import pyarrow as pa

        # The executors are sent the smaller side: the held keys to leave out, or the new
        # ones to keep (in a large backfill, most of a batch's keys may be either).
        send_held = int(held.sum()) <= len(held) // 2
        sent = held if send_held else ~held
        keys = spark.createDataFrame(
            pa.table({HASH_COLUMNS[0]: h1[sent], HASH_COLUMNS[1]: h2[sent]})
        )
        if int(sent.sum()) <= BROADCAST_KEYS:
            keys = F.broadcast(keys)
        unseen = hashed.join(keys, list(HASH_COLUMNS), "left_anti" if send_held else "left_semi")
        return unseen.drop(*HASH_COLUMNS), (h1[~held], h2[~held])

    def added(
        self, spark: SparkSession, hashes: tuple[np.ndarray, np.ndarray], txn: tuple[str, int]
    ) -> None:
        """Record keys the stream has appended to the table (from :meth:`new_rows`) in a write
        tagged ``txn``, and keep the index.

        The table's commits since the index's version must be that write or leave the rows as
        they were; after any other write to the table, its keys are read again at the next
        batch, so that a key another writer added is never taken for a new one.
        """
        if self._index is None:
            return
        self._index.add(*hashes)
        if not self._keeping:
            return
        assert self._version is not None
        try:
            commits = commits_after(spark, self.table, self._version)
        except LookupError:
            self._version = None  # the log cannot be read from here: keep nothing more
            return
        app, batch = txn
        other = next(
            (c for c in commits if c.changes_data and c.transactions.get(app) != batch), None
        )
        if other is not None:
            log.info(
                "%s: version %d was written by another writer; its keys are read again",
                self.table.key,
                other.version,
            )
            self._index = None
            return
        if commits:
            self._version = commits[-1].version
        self._save()
