"""Exactly-once writes of a stream's micro-batches, without Delta's state rebuild per write.

A ``foreachBatch`` function's writes must each happen once, even when Spark runs a batch again
after a crash. Delta's own answer, ``txnAppId``/``txnVersion``, makes every tagged write look
its tag up in the table's state, which Delta rebuilds from the log with Spark jobs on every
write (docs/development.md, "Exactly-once writes"). medallion checks its own writes instead:

- every write carries its stream's app id and the batch id in its commit's ``userMetadata``
  (``{"medallion_batch": {"app": ..., "batch": ...}}``);
- a batch that a query has not started before and that follows a batch it completed cannot
  have been written before: Spark plans batch N only once batch N-1 is committed, by this
  process, which holds the stream's lock. Its writes go straight to Delta;
- any other batch (a query's first, or one run again after a failure) may have been written in
  part by a process before. Each of its writes first reads the table's log tail, newest commit
  first, as JSON (no Spark job), and is skipped when a commit carries its tag. The reading
  stops at the stream's own earlier batch, or at commits older than the time the batch was
  planned (its offsets file). ``txn`` actions count as tags (older medallion, Delta's sink).

A table whose log cannot be read from here (a catalog table; a remote path over Spark Connect)
keeps Delta's check: its writes also carry ``txnAppId``/``txnVersion``, and a possible replay
looks its tag up in ``DESCRIBE HISTORY`` as well.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.config import Config
from medallion.declarations import Flow
from medallion.delta_log import (
    BATCH_TAG_KEY,
    commit_actions,
    commit_tags,
    commit_timestamp,
    committed_version,
    holds_no_files,
)
from medallion.sql_names import TableRef
from medallion.storage import list_names, read_text, write_text
from medallion.streams.sinks import (
    append_batch,
    idempotent_writes,
    merge_into,
    transaction_app_id,
)
from medallion.tables import delta_table, history, save

log = logging.getLogger(__name__)

USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"

# How far the clock of a process that committed a batch's write may lag the clock that planned
# the batch (another driver after a restart): commits this much older than the plan are read.
CLOCK_SKEW_MS = 10 * 60 * 1000


class BatchTag(NamedTuple):
    """Which batch of which stream wrote a commit."""

    app_id: str
    batch_id: int

    def user_metadata(self) -> str:
        """The tag as the commit's ``userMetadata``.

        >>> BatchTag("medallion:s:q", 3).user_metadata()
        '{"medallion_batch": {"app": "medallion:s:q", "batch": 3}}'
        """
        return json.dumps({BATCH_TAG_KEY: {"app": self.app_id, "batch": self.batch_id}})


class UnknownBatchWrites(RuntimeError):
    """A batch run again whose earlier writes cannot be told apart: the log was cleaned up."""


def planned_at(spark: SparkSession, checkpoint: str, batch_id: int) -> int | None:
    """When the stream planned ``batch_id`` (ms since the epoch), from its offsets file; None
    when the file cannot be read (no such batch in this checkpoint)."""
    try:
        text = read_text(spark, f"{checkpoint.rstrip('/')}/offsets/{batch_id}")
        return int(json.loads(text.split("\n")[1])["batchTimestampMs"])
    except Exception:  # noqa: BLE001 - no offsets file to read here
        return None


def plan_batch(
    spark: SparkSession, folder: str, query: str, batch_id: int, planned_ms: int
) -> None:
    """Give a batch run outside a streaming query (a quarantine replay) what its checkpoint
    would hold: ``folder``'s query id (``query``, kept if there is one), which its writes are
    tagged with, and when ``batch_id`` was planned (kept if recorded), back to which a possible
    replay of it reads the tables' logs (:func:`planned_at`)."""
    if "metadata" not in (list_names(spark, folder) or []):
        write_text(spark, f"{folder}/metadata", json.dumps({"id": query}))
    offsets = f"{folder}/offsets"
    if str(batch_id) not in (list_names(spark, offsets) or []):
        planned = json.dumps({"batchTimestampMs": planned_ms})
        write_text(spark, f"{offsets}/{batch_id}", f"v1\n{planned}\n")


def log_readable(spark: SparkSession, table: TableRef) -> bool:
    """True when the table's Delta log can be listed and read from here."""
    if table.path is None:
        return False
    return list_names(spark, f"{table.path.rstrip('/')}/_delta_log") is not None


def _decision(tags: dict[str, int], tag: BatchTag) -> bool | None:
    """What a commit's tags say about ``tag``: True, written (or a later batch of its stream
    was); False, an earlier batch of its stream; None, nothing (another writer's commit)."""
    if tag.app_id not in tags:
        return None
    return tags[tag.app_id] >= tag.batch_id


def written_in_log(
    spark: SparkSession, table: TableRef, tag: BatchTag, planned_ms: int | None
) -> bool:
    """True when a commit of ``table`` carries ``tag``, read from the log tail, newest first.

    Raises :class:`UnknownBatchWrites` when the log was cleaned up before an answer was found.
    """
    return _tag_in_log(spark, table, tag, planned_ms)[0]


def _tag_in_log(
    spark: SparkSession, table: TableRef, tag: BatchTag, planned_ms: int | None
) -> tuple[bool, int | None]:
    """(whether ``tag`` is written, the version of the commit that carries exactly ``tag``)."""
    latest = committed_version(spark, table)
    if latest is None:
        return False, None
    for version in range(latest, -1, -1):
        try:
            actions = commit_actions(spark, table, version)
        except LookupError as error:
            raise UnknownBatchWrites(
                f"{table.key}: cannot tell whether batch {tag.batch_id} of {tag.app_id} was "
                f"written before: its log has no version {version} any more (cleaned up) and "
                "the newer commits do not say. Restore the stream's checkpoint or reset the "
                "layer (docs/operations.md)"
            ) from error
        tags = commit_tags(actions)
        decision = _decision(tags, tag)
        if decision is not None:
            return decision, version if tags[tag.app_id] == tag.batch_id else None
        made = commit_timestamp(actions)
        if planned_ms is not None and made is not None and made < planned_ms - CLOCK_SKEW_MS:
            return False, None
    return False, None


def written_in_history(
    spark: SparkSession, table: TableRef, tag: BatchTag, planned_ms: int | None
) -> bool:
    """:func:`written_in_log` through ``DESCRIBE HISTORY`` (a Spark job), for a log that cannot
    be read from here; it sees ``userMetadata`` tags only (``txn`` tags are Delta's to check)."""
    return _tag_in_history(spark, table, tag, planned_ms)[0]


def _tag_in_history(
    spark: SparkSession, table: TableRef, tag: BatchTag, planned_ms: int | None
) -> tuple[bool, int | None]:
    commits = history(spark, table).where(F.col("userMetadata").contains(BATCH_TAG_KEY))
    if planned_ms is not None:
        since = F.timestamp_millis(F.lit(planned_ms - CLOCK_SKEW_MS))
        commits = commits.where(F.col("timestamp") >= since)
    rows = commits.select("version", "userMetadata").orderBy(F.desc("version")).collect()
    for row in rows:
        tags = commit_tags([{"commitInfo": {"userMetadata": row["userMetadata"]}}])
        decision = _decision(tags, tag)
        if decision is not None:
            exact = tags[tag.app_id] == tag.batch_id
            return decision, int(row["version"]) if exact else None
    return False, None


class BatchWrites:
    """The writes of one batch: each happens unless an earlier run of the batch committed it.

    ``replay`` says whether the batch may have run before; when it cannot have, no write looks
    anything up. Writes of one batch may run side by side, each to its own table.
    ``readable`` remembers, by table key, whether a table's log can be read from here: it
    cannot change under a running query, so the query's batches share it. ``holding`` holds the
    keys of tables found holding data files, which :meth:`merge` does not look at again: a
    MERGE is right whatever a table holds, so only a table's emptiness must be read afresh.
    """

    def __init__(
        self,
        spark: SparkSession,
        batch_id: int,
        replay: bool,
        checkpoint: str | None = None,
        readable: dict[str, bool] | None = None,
        holding: set[str] | None = None,
    ) -> None:
        self.spark, self.batch_id, self.replay = spark, batch_id, replay
        self.checkpoint = checkpoint
        self._readable = {} if readable is None else readable
        self._holding = set() if holding is None else holding

    def tag(self, app_id: str) -> BatchTag:
        return BatchTag(app_id, self.batch_id)

    def _log_readable(self, table: TableRef) -> bool:
        if table.key not in self._readable:
            self._readable[table.key] = log_readable(self.spark, table)
        return self._readable[table.key]

    @cached_property
    def planned_ms(self) -> int | None:
        """When the stream planned this batch (:func:`planned_at`); None without a checkpoint."""
        if self.checkpoint is None:
            return None
        return planned_at(self.spark, self.checkpoint, self.batch_id)

    def written_before(self, table: TableRef, app_id: str) -> bool:
        """True when an earlier run of this batch committed its write of ``app_id`` to ``table``."""
        if not self.replay:
            return False
        written = self._tag_lookup(table, app_id)[0]
        if written:
            log.info("%s: batch %d was written before; not again", table.key, self.batch_id)
        return written

    def commit_of(self, table: TableRef, app_id: str) -> int | None:
        """The version of the commit that this batch's write of ``app_id`` made to ``table``
        (in this run or an earlier one); None when it made none."""
        return self._tag_lookup(table, app_id)[1]

    def _tag_lookup(self, table: TableRef, app_id: str) -> tuple[bool, int | None]:
        """(written, the version of the commit carrying exactly this batch's tag), from the
        log when it can be read from here, else from the table's history."""
        tag, planned = self.tag(app_id), self.planned_ms
        if self._log_readable(table):
            return _tag_in_log(self.spark, table, tag, planned)
        return _tag_in_history(self.spark, table, tag, planned)

    def _delta_txn(self, table: TableRef, app_id: str) -> tuple[str, int] | None:
        """Delta's own tag as well, for a table whose log is not read from here."""
        return None if self._log_readable(table) else self.tag(app_id)

    def append(
        self, df: DataFrame, table: TableRef, app_id: str, merge_schema: bool = False
    ) -> bool:
        """Append ``df`` to ``table`` unless this batch did before; True when it wrote."""
        if self.written_before(table, app_id):
            return False
        self._append(df, table, app_id, merge_schema)
        return True

    def _append(self, df: DataFrame, table: TableRef, app_id: str, merge_schema: bool) -> None:
        txn = self._delta_txn(table, app_id)
        append_batch(df, table, merge_schema, txn, self.tag(app_id).user_metadata())

    def merge(
        self,
        table: TableRef,
        rows: DataFrame,
        keys: Sequence[str],
        clauses: str,
        app_id: str,
        schema_evolution: bool = False,
        into_empty: DataFrame | None = None,
    ) -> bool:
        """``MERGE INTO`` the table (:func:`~medallion.streams.sinks.merge_into`) unless this
        batch did before; True when it merged.

        ``into_empty`` are the rows the MERGE inserts into a table that holds none (what its
        ``NOT MATCHED`` clauses insert). When they are given and the table's log says it holds
        no data files (a fresh lake's first batch), they are appended instead: one Spark job
        rather than a MERGE's ten, with the same rows and change feed. Nothing can add rows in
        between: the stream holding the table's lease is its one writer.
        """
        if self.written_before(table, app_id):
            return False
        if into_empty is not None and self._holds_no_files(table):
            self._append(into_empty, table, app_id, schema_evolution)
            return True
        with self._tagged(table, app_id):
            merge_into(self.spark, table, rows, keys, clauses, schema_evolution)
        return True

    def _holds_no_files(self, table: TableRef) -> bool:
        """Whether the table's log says it holds no data files; once it has some, not read again."""
        if table.key in self._holding:
            return False
        if holds_no_files(self.spark, table):
            return True
        self._holding.add(table.key)
        return False

    def delete(self, table: TableRef, source: DataFrame, condition: Column, app_id: str) -> bool:
        """Delete the rows (``t``) matching a ``source`` row (``s``) by ``condition`` unless
        this batch did: a MERGE, whose log keeps the condition, no value. True when it did."""
        if self.written_before(table, app_id):
            return False
        with self._tagged(table, app_id):
            merge = delta_table(self.spark, table).alias("t").merge(source.alias("s"), condition)
            merge.whenMatchedDelete().execute()
        return True

    def replace_where(self, table: TableRef, rows: DataFrame, predicate: str, app_id: str) -> bool:
        """Replace the table's rows that meet the SQL ``predicate`` with ``rows`` (which must
        meet it too), in one commit, unless this batch did before; True when it wrote."""
        if self.written_before(table, app_id):
            return False
        writer = rows.write.format("delta").mode("overwrite").option("replaceWhere", predicate)
        writer = writer.option("userMetadata", self.tag(app_id).user_metadata())
        txn = self._delta_txn(table, app_id)
        if txn is not None:
            writer = writer.option("txnAppId", txn[0]).option("txnVersion", txn[1])
        save(writer, table)
        return True

    @contextmanager
    def _tagged(self, table: TableRef, app_id: str) -> Iterator[None]:
        """Tag the session's commits in the block: a SQL command takes no write options."""
        txn = self._delta_txn(table, app_id)
        self.spark.conf.set(USER_METADATA_CONF, self.tag(app_id).user_metadata())
        try:
            if txn is None:
                yield
            else:
                with idempotent_writes(self.spark, *txn):
                    yield
        finally:
            self.spark.conf.unset(USER_METADATA_CONF)


class ReplayGuard:
    """The batches one started query runs, to tell a new batch from one that may have run
    before. Make one per ``foreachBatch`` function."""

    def __init__(self, checkpoint: str | None = None) -> None:
        self.checkpoint = checkpoint
        self._started: int | None = None
        self._completed: int | None = None
        self._readable: dict[str, bool] = {}  # whether each table's log is read from here
        self._holding: set[str] = set()  # the tables found holding data files

    @contextmanager
    def batch(self, spark: SparkSession, batch_id: int) -> Iterator[BatchWrites]:
        """The writes of ``batch_id``; the batch counts as completed when the block ends
        without an error."""
        new = self._completed == batch_id - 1 and self._started == batch_id - 1
        self._started = batch_id
        yield BatchWrites(spark, batch_id, not new, self.checkpoint, self._readable, self._holding)
        self._completed = batch_id


@dataclass(frozen=True)
class MergingBatches:
    """The batch factory of a flow that MERGEs ``rows(batch)`` into the one table it writes,
    on ``keys`` with ``clauses``, once per batch: a batch replayed after a crash merges nothing
    twice.

    Example::

        status_batch = MergingBatches(latest_per_device, ("device_id",), NEWER_WINS)
        Flow("gold_device_status", "gold", SILVER, (STATUS,), batch=status_batch)
    """

    rows: Callable[[DataFrame], DataFrame]
    keys: tuple[str, ...]
    clauses: str

    def __call__(
        self, config: Config, flow: Flow, checkpoint: str, stream: str | None = None
    ) -> MergingBatch:
        (table,) = flow.outputs
        app_id = transaction_app_id(stream or flow.name, checkpoint)
        return MergingBatch(self, config.table(table.key), app_id, ReplayGuard(checkpoint))


@dataclass(frozen=True)
class MergingBatch:
    """The ``foreachBatch`` function of one stream of a :class:`MergingBatches` flow."""

    merging: MergingBatches
    table: TableRef
    app_id: Callable[[SparkSession], str]
    guard: ReplayGuard

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        merging = self.merging
        with self.guard.batch(spark, batch_id) as writes:
            rows = merging.rows(batch)
            writes.merge(self.table, rows, merging.keys, merging.clauses, self.app_id(spark))
