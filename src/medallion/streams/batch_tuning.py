"""How a ``foreachBatch`` function plans a micro-batch for its size, and what it caches for it.

Up to :data:`SMALL_BATCH_ROWS` rows (or, before they are counted, :data:`SMALL_BATCH_BYTES` of
input files) a batch is small. Its queries are not compiled to Java: generating and compiling
the code of the validation rules takes longer than evaluating them for a small batch (local
sessions compile nothing by default, medallion/session.py). Its shuffles get one partition and
no adaptive planning, whose extra jobs (one per stage) cost more than its work. A larger batch
is compiled, with the stream's own shuffle settings.
"""

from __future__ import annotations

import os

from pyspark.sql import DataFrame, SparkSession

from medallion.session import is_connect_session
from medallion.storage import local_path

SMALL_BATCH_ROWS = 50_000
SMALL_BATCH_BYTES = 8 << 20
SMALL_BATCH_CONF = {
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
LARGE_BATCH_CONF = {
    "spark.sql.codegen.wholeStage": "true",
    "spark.sql.codegen.factoryMode": "FALLBACK",
}
# A batch's cached rows live for one batch: building the cache uncompressed costs a tenth of
# compressing it.
CACHE_CONF = {"spark.sql.inMemoryColumnarStorage.compressed": "false"}


def input_bytes(batch: DataFrame) -> int | None:
    """The size of the files a micro-batch of a file source reads, when they are local; None
    for any other batch (Kafka records, remote files)."""
    try:
        files = batch.inputFiles()
    except Exception:  # noqa: BLE001 - a source whose plan lists no files
        return None
    paths = [local_path(f) for f in files]
    if not paths or None in paths:
        return None
    try:
        return sum(os.path.getsize(p) for p in paths if p is not None)
    except OSError:
        return None


def is_small(rows: int | None, input_bytes: int | None = None) -> bool:
    """Whether a batch of ``rows`` rows (or, when they are not counted yet, of ``input_bytes``
    bytes of input) is small; a batch of unknown size is not.

    >>> is_small(50_000), is_small(50_001), is_small(None, 1 << 20), is_small(None)
    (True, False, True, False)
    """
    if rows is not None:
        return rows <= SMALL_BATCH_ROWS
    return input_bytes is not None and input_bytes <= SMALL_BATCH_BYTES


class SizeTuning:
    """Plans the rest of each batch for its size, in the stream's own session: small batches
    with :data:`SMALL_BATCH_CONF`, the others compiled, with the stream's shuffle settings.
    Make one per ``foreachBatch`` function: it remembers the settings the stream started with."""

    def __init__(self) -> None:
        self._started_with: dict[str, str | None] | None = None

    @staticmethod
    def before_caching(spark: SparkSession) -> None:
        """Settings for the batch's cache, before anything is cached."""
        for key, value in CACHE_CONF.items():
            spark.conf.set(key, value)

    def __call__(
        self, spark: SparkSession, rows: int | None, input_bytes: int | None = None
    ) -> None:
        """Tune for ``rows`` (or, when they are not counted yet, ``input_bytes``)."""
        if self._started_with is None:
            self._started_with = {key: spark.conf.get(key, None) for key in SMALL_BATCH_CONF}
        small = is_small(rows, input_bytes)
        for key, value in SMALL_BATCH_CONF.items():
            chosen = value if small else LARGE_BATCH_CONF.get(key, self._started_with[key])
            if chosen is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, chosen)


class BatchCache:
    """DataFrames cached for one batch, all released when it ends.

    Over Spark Connect a frame is checkpointed in the server's memory instead: a Connect
    client sends a frame's whole plan with every command, and the plans of a fused batch
    (parsing, validation, deduplication, gold's increments) nest deeper than the protocol's
    limit. A checkpointed frame is a reference to its rows; the server drops them when the
    client releases the frame.
    """

    def __init__(self) -> None:
        self._frames: list[DataFrame] = []

    def __call__(self, df: DataFrame) -> DataFrame:
        """``df``, cached (or checkpointed) until :meth:`release`; a frame this cache already
        holds is given back as it is."""
        if any(df is held for held in self._frames):
            return df
        kept = df.localCheckpoint() if is_connect_session(df.sparkSession) else df.persist()
        self._frames.append(kept)
        return kept

    def release(self) -> None:
        """Drop every frame cached since the last release."""
        for df in self._frames:
            if not is_connect_session(df.sparkSession):
                df.unpersist()
        self._frames.clear()
