"""The events pipeline's fused batch: each micro-batch of input lines through bronze, silver
and gold in one ``foreachBatch`` (silver and gold alone, while a rebuilt layer catches up:
catch_up.py).

A fused batch parses each line once: the same projection gives bronze its rows and silver
its verdicts. Its writes, the first three side by side:

1. bronze: every line (tagged with the query id, as Delta's own streaming sink tags it, so a
   batch that sink committed before is skipped too);
2. the quarantine: the invalid lines;
3. silver: the valid events whose ``event_id`` silver does not hold yet (first arrival wins;
   which ids silver holds is kept in memory, streams/known_keys.py);
4. then gold: what those rows add to ``gold/hourly_product_metrics``, then the user keys they
   counted into ``gold/hourly_product_users``.

Writes 2-4 are tagged ``medallion:<stream>:<query id>``; every write is tagged with the batch
id, and a replayed batch writes nothing twice, whichever of them committed before a crash
(streams/exactly_once.py). Gold adds the rows this batch inserted into silver: found before
silver's append, or, when a crash came between silver's commit and gold's, found again in
silver by their ingestion time and file.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.config import Config
from medallion.conflicts import retry_on_conflict
from medallion.declarations import LAYERS
from medallion.faults import pause_point
from medallion.parallel import side_by_side
from medallion.pipelines.retail.contract import EVENTS
from medallion.pipelines.retail.transforms.gold import (
    HOURLY_KEYS,
    METRIC_COLUMNS,
    USER_KEY_COLUMNS,
    hourly_increments,
    hourly_user_keys,
)
from medallion.pipelines.retail.transforms.silver import (
    bronze_rows,
    deduplicate_events,
    quarantined_events,
    valid_events,
    validate_events,
)
from medallion.sql_names import TableRef
from medallion.streams.batch_tuning import BatchCache, SizeTuning, input_bytes
from medallion.streams.exactly_once import BatchWrites, ReplayGuard
from medallion.streams.known_keys import KnownKeys, kept_keys
from medallion.streams.quality import BatchQuality, QualityGate
from medallion.streams.sinks import transaction_app_id
from medallion.streams.stage_clock import STAGE_CLOCK, StageClock
from medallion.streams.table_schema import check_table_schema
from medallion.tables import history, holds_data, read_table
from medallion.transforms.bronze import raw_lines

log = logging.getLogger(__name__)

# The stages of the events pipeline, in order: bronze's flow, then the flows it fuses.
STAGES = LAYERS

# Gold's row plus the batch's increments: silver only ever inserts, so every metric adds up.
_ADD_METRICS = (
    "WHEN MATCHED THEN UPDATE SET "
    + ", ".join(f"t.`{c}` = t.`{c}` + s.`{c}`" for c in METRIC_COLUMNS)
    + " WHEN NOT MATCHED THEN INSERT *"
)
EVENT_COLUMNS = ("event_type", "user_id", "product_id", "revenue", "event_timestamp", "event_date")
# How a silver row is told apart from the copies of its event_id that other batches saw.
_ARRIVAL_COLUMNS = ("event_id", "_ingested_at", "_source_file")


@dataclass(frozen=True)
class EventTables:
    """The tables the events pipeline writes."""

    bronze: TableRef
    silver: TableRef
    quarantine: TableRef
    gold: TableRef
    users: TableRef

    @classmethod
    def of(cls, config: Config) -> EventTables:
        return cls(
            bronze=config.table("bronze/events"),
            silver=config.table("silver/events"),
            quarantine=config.table("silver/events_quarantine"),
            gold=config.table("gold/hourly_product_metrics"),
            users=config.table("gold/hourly_product_users"),
        )


def lost_users_refusal(spark: SparkSession, config: Config) -> str | None:
    """Why gold cannot be carried: ``gold/hourly_product_users`` lost its rows while gold holds
    data, so users already counted would be counted again. None when all is well."""
    tables = EventTables.of(config)
    if holds_data(spark, tables.users) or not holds_data(spark, tables.gold):
        return None
    if _writes_that_added(spark, tables.gold) <= 1:
        # A crash between gold's first write and the append of the users it counted: the
        # replayed batch skips gold's write (it carries the batch's tag) and appends them.
        return None
    return (
        f"{tables.users.key} holds no rows while {tables.gold.key} holds data, so the users "
        "gold counted are unknown and would be counted again: rebuild gold from silver with "
        f"`medallion reset --lake {config.lake} --layer gold` (docs/operations.md)"
    )


def _metric(name: str) -> Column:
    """A commit's operation metric ``name`` as a number (0 when it has none)."""
    return F.coalesce(F.col("operationMetrics")[name].cast("long"), F.lit(0))


def _writes_that_added(spark: SparkSession, table: TableRef) -> int:
    """How many commits of the table inserted or updated rows: its MERGEs, and the append that
    takes a MERGE's place in a table without rows (``BatchWrites.merge``)."""
    merged = (F.col("operation") == "MERGE") & (
        _metric("numTargetRowsInserted") + _metric("numTargetRowsUpdated") > 0
    )
    appended = (F.col("operation") == "WRITE") & (_metric("numOutputRows") > 0)
    return history(spark, table).where(merged | appended).count()


@dataclass
class SilverRows:
    """What a batch adds to silver: its valid events, one per ``event_id`` (the first to
    arrive), and those of them silver does not hold yet, with their key hashes."""

    deduplicated: DataFrame
    new: DataFrame
    hashes: tuple[np.ndarray, np.ndarray]

    @property
    def count(self) -> int:
        return len(self.hashes[0])


def new_silver_rows(
    spark: SparkSession,
    validated: DataFrame,
    extra_columns: Sequence[str],
    known_ids: KnownKeys,
    persist: BatchCache,
) -> SilverRows:
    """The batch's events that silver does not hold: which ids it holds is looked up in memory
    (``known_ids``), not read from silver."""
    deduplicated = persist(deduplicate_events(valid_events(validated, extra_columns)))
    unseen, hashes = known_ids.new_rows(spark, deduplicated)
    return SilverRows(deduplicated, persist(unseen), hashes)


def append_silver(
    tables: EventTables,
    rows: SilverRows,
    merge_schema: bool,
    known_ids: KnownKeys,
    writes: BatchWrites,
    app: str,
) -> None:
    """Append the new rows to silver as ``app``'s write of the batch; retried as it is when it
    loses a race with a concurrent OPTIMIZE."""
    if not rows.count:
        return
    retry_on_conflict(
        lambda: writes.append(rows.new, tables.silver, app, merge_schema),
        f"append to {tables.silver.key}",
    )
    known_ids.added(rows.new.sparkSession, rows.hashes, writes.tag(app))


def rows_this_batch_inserted(
    spark: SparkSession, silver: TableRef, candidates: DataFrame, ingested: tuple[object, object]
) -> DataFrame:
    """The rows of silver that came from ``candidates`` (rows of one batch, one per
    ``event_id``): a copy of an event that an earlier batch inserted has another ingestion
    time or file. ``ingested`` is the (least, greatest) ``_ingested_at`` of the candidates,
    which prunes silver's files by their statistics."""
    low, high = ingested
    held = read_table(spark, silver).where(F.col("_ingested_at").between(low, high))
    # No broadcast hint: Spark broadcasts a small batch's candidates by their size, and joins a
    # large one's by a shuffle (a replayed backfill batch of 2.35M rows, broadcast, ran a
    # 1 GiB driver out of memory).
    return held.join(candidates.select(*_ARRIVAL_COLUMNS), list(_ARRIVAL_COLUMNS), "left_semi")


def write_gold(
    spark: SparkSession,
    tables: EventTables,
    new_rows: DataFrame,
    known_users: KnownKeys,
    persist: BatchCache,
    writes: BatchWrites,
    app: str,
) -> None:
    """Add ``new_rows`` (rows new to silver, cached) to gold, as ``app``'s writes of the batch.

    Their counts and revenue are added to their (hour, product) rows, whatever the hour's age.
    ``unique_users`` grows by the (hour, product, user) keys that ``gold/hourly_product_users``
    does not hold yet (``known_users``), which are then appended there. The keys come after
    gold's MERGE: a crash between the two replays the batch against the same keys, and the
    MERGE, already committed, is skipped by its tag.
    """
    events = new_rows.select(*EVENT_COLUMNS)  # read from new_rows' cache
    keys = persist(hourly_user_keys(events))
    unseen, hashes = known_users.new_rows(spark, keys)
    new_keys = persist(unseen)
    increments = hourly_increments(events, new_keys)
    writes.merge(tables.gold, increments, HOURLY_KEYS, _ADD_METRICS, app, into_empty=increments)
    pause_point("gold_hourly:metrics_merged")  # crash tests only
    if len(hashes[0]):
        retry_on_conflict(
            lambda: writes.append(new_keys, tables.users, app), f"append to {tables.users.key}"
        )
        known_users.added(spark, hashes, writes.tag(app))


def batch_summary(
    validated: DataFrame, gate: QualityGate
) -> tuple[BatchQuality, int, tuple[object, object]]:
    """One job over a cached batch: each rule's failures (with its rows), its invalid rows, and
    the valid rows' least and greatest ``_ingested_at``."""
    valid = F.col("reason").isNull()
    quality, (invalid, low, high) = gate.measure(
        validated,
        F.count(F.when(~valid, 1)),
        F.min(F.when(valid, F.col("_ingested_at"))),
        F.max(F.when(valid, F.col("_ingested_at"))),
    )
    return quality, int(invalid), (low, high)


class EventsBatch:
    """The ``foreachBatch`` function of the events stream: a batch of input lines (``value``,
    ``_source_file``, ``_ingested_at``, any Kafka metadata) through ``stages``, which start
    with bronze (``("bronze",)`` writes bronze alone, while silver and gold catch up).

    Made once per stream: it keeps what outlives a batch (the key indexes, the settings the
    stream started with). Each batch is validated once (:meth:`validate`), then bronze, the
    quarantine and silver (then gold) are written side by side (:meth:`write`).
    """

    def __init__(
        self,
        config: Config,
        stream: str,
        checkpoint: str,
        stages: Sequence[str] = STAGES,
        clock: StageClock = STAGE_CLOCK,
    ) -> None:
        if not stages or tuple(stages) != STAGES[: len(stages)]:
            raise ValueError(f"the events stages are a prefix of {STAGES}, not {tuple(stages)}")
        self.stages, self.checkpoint, self.clock = tuple(stages), checkpoint, clock
        self.tables = EventTables.of(config)
        self.extra = config.carried("silver/events")
        self.tune_for_size = SizeTuning()
        self.stream = stream
        # Bronze is tagged with the bare query id, as Delta's own streaming sink tags a batch.
        self.bronze_app = transaction_app_id(None, checkpoint)
        self.stream_app = transaction_app_id(self.stream, checkpoint)
        silver, users = self.tables.silver, self.tables.users
        self.known_ids = KnownKeys(silver, ["event_id"], kept_keys(checkpoint, silver))
        self.known_users = KnownKeys(users, USER_KEY_COLUMNS, kept_keys(checkpoint, users))
        self.guard = ReplayGuard(checkpoint)
        self.gate = QualityGate(config, self.stream, EVENTS, silver.key)

    def __call__(self, lines: DataFrame, batch_id: int) -> None:
        spark = lines.sparkSession
        persist = BatchCache()
        try:
            with self.guard.batch(spark, batch_id) as writes:
                self.write(spark, lines, writes, persist)
        finally:
            persist.release()

    def validate(
        self, spark: SparkSession, lines: DataFrame, persist: BatchCache
    ) -> tuple[DataFrame, BatchQuality, int, tuple[object, object]]:
        """The batch's lines parsed and validated once (cached), and :func:`batch_summary`."""
        with self.clock.timing("bronze"):
            self.tune_for_size.before_caching(spark)
            self.tune_for_size(spark, None, input_bytes(lines))
            validated = persist(
                validate_events(
                    raw_lines(lines),
                    self.extra,
                    with_bronze=True,
                    expectations=self.gate.expectations,
                )
            )
            quality, invalid, ingested = batch_summary(validated, self.gate)
            self.tune_for_size(spark, quality.rows)
        return validated, quality, invalid, ingested

    def write(
        self, spark: SparkSession, lines: DataFrame, writes: BatchWrites, persist: BatchCache
    ) -> None:
        """Validate the batch, then write bronze, the quarantine, silver and gold, and record
        the batch's data quality."""
        schema = (
            check_table_schema(spark, self.tables.silver, self.stream, self.checkpoint, self.extra)
            if "silver" in self.stages
            else None
        )
        validated, quality, invalid, ingested = self.validate(spark, lines, persist)
        if not quality.rows:
            return
        if schema is not None:
            self.gate.check(validated, quality)  # a rule set to fail stops the batch here
        app = self.stream_app(spark)
        # Bronze, the quarantine and silver (then gold) are written side by side: each write
        # is tagged on its own, so any of them may commit first, and a replay skips those
        # that did.
        work = [lambda: self.write_bronze(spark, validated, writes)]
        if schema is not None:
            merge_schema = bool(self.extra or schema.unexpected)
            if invalid:
                work.append(lambda: self.write_quarantine(validated, writes, app))
            if quality.rows > invalid:
                work.append(
                    lambda: self.write_silver_and_gold(
                        spark, validated, ingested, merge_schema, writes, persist, app
                    )
                )
            work.append(lambda: self.gate.record(writes, quality, app))  # the data-quality log
        side_by_side(work)

    def write_bronze(self, spark: SparkSession, validated: DataFrame, writes: BatchWrites) -> None:
        """Every line of the batch, to bronze."""
        with self.clock.timing("bronze"):
            writes.append(bronze_rows(validated), self.tables.bronze, self.bronze_app(spark))
        pause_point("bronze_events:appended")  # crash tests only

    def write_quarantine(self, validated: DataFrame, writes: BatchWrites, app: str) -> None:
        """The batch's invalid lines, each with its reason, to the quarantine."""
        writes.append(quarantined_events(validated), self.tables.quarantine, app)
        pause_point("silver_events:quarantined")  # crash tests only

    def write_silver_and_gold(
        self,
        spark: SparkSession,
        validated: DataFrame,
        ingested: tuple[object, object],
        merge_schema: bool,
        writes: BatchWrites,
        persist: BatchCache,
        app: str,
    ) -> None:
        """The valid events new to silver, appended to silver and added to gold side by side:
        gold adds the rows silver does not hold yet, so it need not wait for their append."""
        with self.clock.timing("silver"):
            found = new_silver_rows(spark, validated, self.extra, self.known_ids, persist)

        def silver() -> None:
            with self.clock.timing("silver"):
                append_silver(self.tables, found, merge_schema, self.known_ids, writes, app)
            pause_point("silver_events:appended")  # crash tests only

        def gold() -> None:
            with self.clock.timing("gold"):
                new_rows = found.new
                if not found.count:
                    # Nothing new, or a replay after silver's append committed: then the rows
                    # it inserted are found in silver again.
                    new_rows = persist(
                        rows_this_batch_inserted(
                            spark, self.tables.silver, found.deduplicated, ingested
                        )
                    )
                write_gold(spark, self.tables, new_rows, self.known_users, persist, writes, app)

        side_by_side([silver, gold] if "gold" in self.stages else [silver])
