"""``medallion quarantine replay``: quarantined records checked again against the contract as
the settings now give it, and those that pass promoted into silver, exactly once.

A replay of one quarantine (docs/governance.md, "Quarantine replay"):

1. **Plan.** It chooses the quarantine's records (``--reason-like``, ``--since``), finds their
   bronze rows (by file, ingestion time and line), validates them as the silver flow does, and
   appends one row per record that now passes to ``<lake>/_system/quarantine_replays``:
   ``promoted``, or ``duplicate`` when silver already holds its key or an earlier copy of it
   comes with the replay. That append is one commit: from then on the replay's input is fixed.
2. **Promote.** The records' bronze rows go through the silver flow's own batch, as batch
   ``replay_id`` of stream ``replay_<flow>`` (first arrival wins, keys held are skipped, the
   data-quality log counts them), then the rows it inserted through the batch of each flow fused
   downstream (retail's hourly gold); flows that read silver as a stream follow on their next
   run. Every write is tagged with the replay's stream and id (streams/exactly_once.py).
3. **Leave the quarantine.** A DELETE removes the planned records from the quarantine; a
   ``finished`` row in the log closes the replay.

A replay interrupted anywhere is finished by the next one, from its plan, before a new one
starts: its tagged writes are skipped where they committed, and the DELETE finds nothing left
to delete. A replay holds the locks of the streams that write what it writes, so it is refused
while they run.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from medallion.config import Config
from medallion.conflicts import retry_on_conflict
from medallion.declarations import Flow, Pipeline, QuarantineReplay, Table
from medallion.deployment import checked, pipelines_of
from medallion.expectations import expectation_setting, expectations_of
from medallion.faults import pause_point
from medallion.locks import stream_locks
from medallion.ops.quarantine import ingested_since
from medallion.pipelines import declared_contract
from medallion.sql_names import TableRef
from medallion.streams.exactly_once import plan_batch
from medallion.streams.flows import fusion_head
from medallion.streams.fusion import feed_fused
from medallion.streams.sinks import append_batch
from medallion.tables import allow_deletes, create_delta_table, read_table, table_exists

log = logging.getLogger(__name__)

REPLAYS_TABLE_KEY = "_system/quarantine_replays"
REPLAYS_SCHEMA = (
    "replay_id BIGINT, quarantine STRING, stream STRING, outcome STRING, record_key STRING, "
    "reason STRING, _source_file STRING, _ingested_at TIMESTAMP, raw_sha256 STRING, "
    "settings STRING, recorded_at TIMESTAMP"
)
PROMOTED, DUPLICATE, FINISHED = "promoted", "duplicate", "finished"


def _raw_sha256(table: str = "") -> str:
    """The SQL of a quarantine or bronze row's line hash (``table``: its alias and a dot)."""
    return f"sha2(coalesce({table}_raw, ''), 256)"


# Which quarantine row a record is, and which bronze row it came from.
IDENTITY = ("_source_file", "_ingested_at", "raw_sha256")
_SAME_RECORD = (
    "t._source_file <=> s._source_file AND t._ingested_at <=> s._ingested_at "
    f"AND {_raw_sha256('t.')} = s.raw_sha256"
)
# The query id of every replay's checkpoint folder: a replay is told apart by its stream and id.
REPLAY_QUERY_ID = "quarantine-replay"


@dataclass(frozen=True)
class ReplayResult:
    """One quarantine's replay: the records chosen, those that now pass, and what became of
    those (``replay_id`` None: a dry run, or nothing passed)."""

    quarantine: str
    chosen: int
    passing: int
    promoted: int
    duplicates: int
    replay_id: int | None = None
    resumed: bool = False  # an interrupted replay, finished by this one

    def as_json(self) -> dict:
        return asdict(self)

    def describe(self, dry_run: bool) -> str:
        """One line for people."""
        if self.resumed:
            return (
                f"{self.quarantine}: finished interrupted replay {self.replay_id} "
                f"({self.promoted} promoted, {self.duplicates} duplicates)"
            )
        verb = "would promote" if dry_run else "promoted"
        replay = f" (replay {self.replay_id})" if self.replay_id is not None else ""
        return (
            f"{self.quarantine}: {self.chosen} chosen, {self.passing} now pass: {verb} "
            f"{self.promoted}, {self.duplicates} duplicates; "
            f"{self.chosen - self.passing} still quarantined{replay}"
        )


def replays_table(config: Config) -> TableRef:
    """The lake's log of quarantine replays."""
    return config.system_table(REPLAYS_TABLE_KEY.removeprefix("_system/"))


def replay_quarantines(
    spark: SparkSession,
    config: Config,
    reason_like: str | None = None,
    since: datetime | None = None,
    dry_run: bool = False,
) -> list[ReplayResult]:
    """Replay every quarantine of ``config``'s pipelines that exists in the lake: records whose
    reason matches ``reason_like`` (a SQL LIKE pattern; without ``%``, any reason containing
    it) and that were ingested at or after ``since`` (naive: UTC). Raises
    :class:`~medallion.locks.LockHeld` while a stream that writes what a replay writes runs."""
    results = []
    for pipeline in pipelines_of(config):
        for replay in pipeline.replays:
            if table_exists(spark, config.table(replay.quarantine.key)):
                job = _Replay(spark, config, pipeline, replay)
                results += job.run(reason_like, since, dry_run)
    return results


class _Replay:
    """The replays of one quarantine."""

    def __init__(
        self, spark: SparkSession, config: Config, pipeline: Pipeline, replay: QuarantineReplay
    ) -> None:
        self.spark, self.config, self.replay = spark, config, replay
        flows = {f.name: f for f in pipeline.flows}
        self.flow: Flow = flows[replay.flow]
        self.feeds: list[Flow] = [flows[name] for name in replay.feeds]
        self.also: list[Flow] = [flows[name] for name in replay.also]
        assert isinstance(self.flow.source, Table)
        self.bronze = config.table(self.flow.source.key)
        self.quarantine = config.table(replay.quarantine.key)
        self.silver = config.table(
            next(t.key for t in self.flow.outputs if not t.quarantine and t.layer == "silver")
        )
        self.log = replays_table(config)
        self._use_settings(config.settings)
        self._cached: list[DataFrame] = []

    def _expectation_settings(self, settings: dict[str, str]) -> dict[str, str]:
        """The settings of this dataset's expectations among ``settings``."""
        dataset = self.replay.dataset
        return {
            n: v for n, v in settings.items() if (expectation_setting(n) or ("",))[0] == dataset
        }

    def _use_settings(self, settings: dict[str, str]) -> None:
        """Validate and promote with ``settings``: those of a new replay, or those an
        interrupted replay was planned with (its records passed by them)."""
        self.config = checked(self.config.with_options(settings=settings))
        self.settings = json.dumps(dict(sorted(self._expectation_settings(settings).items())))
        self.expectations = expectations_of(declared_contract(self.replay.dataset), settings)

    def _planned_settings(self, planned: DataFrame) -> dict[str, str]:
        """The settings in force, with this dataset's expectations as ``planned`` records them."""
        recorded = json.loads(planned.select("settings").first().settings or "{}")
        ours = self._expectation_settings(self.config.settings)
        return {**{n: v for n, v in self.config.settings.items() if n not in ours}, **recorded}

    @property
    def streams(self) -> list[str]:
        """The streams whose locks the replay holds: those it writes for, and their heads."""
        names = [self.flow.name, *(f.name for f in (*self.feeds, *self.also))]
        heads = [head.name for n in names if (head := fusion_head(n)) is not None]
        return list(dict.fromkeys([*names, *heads]))

    def run(
        self, reason_like: str | None, since: datetime | None, dry_run: bool
    ) -> list[ReplayResult]:
        try:
            return self._run(reason_like, since, dry_run)
        finally:
            for cached in self._cached:
                cached.unpersist()

    def _run(
        self, reason_like: str | None, since: datetime | None, dry_run: bool
    ) -> list[ReplayResult]:
        if dry_run:
            unfinished = self._unfinished()
            if unfinished is not None:
                log.warning(
                    "%s: replay %d was interrupted; the next replay finishes it first",
                    self.quarantine.key,
                    unfinished,
                )
            return [self._counts(self._plan(reason_like, since))]
        with stream_locks(
            self.config.checkpoints_folder, self.streams, "medallion quarantine replay"
        ):
            create_delta_table(self.spark, self.log, REPLAYS_SCHEMA, {})
            results = []
            unfinished = self._unfinished()
            if unfinished is not None:
                given = self.config.settings
                results.append(self._execute(unfinished, resumed=True))
                self._use_settings(given)
            plan = self._plan(reason_like, since)
            counts = self._counts(plan)
            if not counts.passing:
                return [*results, counts]
            replay_id = self._next_id()
            self._write_plan(plan, replay_id)
            pause_point("quarantine_replay:planned")  # crash tests only
            self._execute(replay_id)
            return [*results, replace(counts, replay_id=replay_id)]

    def _history(self) -> DataFrame:
        return read_table(self.spark, self.log).where(F.col("quarantine") == self.quarantine.key)

    def _unfinished(self) -> int | None:
        """The id of this quarantine's last replay if it never finished."""
        if not table_exists(self.spark, self.log):
            return None
        last = (
            self._history()
            .groupBy("replay_id")
            .agg(F.count_if(F.col("outcome") == FINISHED).alias("finished"))
        )
        row = last.orderBy(F.desc("replay_id")).first()
        return None if row is None or row.finished else int(row.replay_id)

    def _next_id(self) -> int:
        """One more than the lake's last replay id."""
        latest = read_table(self.spark, self.log).agg(F.max("replay_id")).first()[0]
        return int(latest or 0) + 1

    def _chosen(self, reason_like: str | None, since: datetime | None) -> DataFrame:
        rows = ingested_since(read_table(self.spark, self.quarantine), since)
        if reason_like:
            pattern = reason_like if "%" in reason_like else f"%{reason_like}%"
            rows = rows.where(F.col("reason").like(pattern))
        key_column = self.replay.quarantine.columns[0]
        return rows.select(
            F.col(key_column).cast("string").alias("record_key"),
            "reason",
            "_source_file",
            "_ingested_at",
            F.expr(_raw_sha256()).alias("raw_sha256"),
        )

    def _bronze_rows(self, records: DataFrame) -> DataFrame:
        """The bronze rows of ``records`` (rows with :data:`IDENTITY`)."""
        identities = records.select(*IDENTITY).distinct()
        low, high = identities.agg(F.min("_ingested_at"), F.max("_ingested_at")).first()
        bronze = read_table(self.spark, self.bronze)
        if low is not None:
            bronze = bronze.where(F.col("_ingested_at").between(low, high))
        hashed = bronze.withColumn("raw_sha256", F.expr(_raw_sha256()))
        return hashed.join(identities, list(IDENTITY), "left_semi").drop("raw_sha256")

    def _validated(self, bronze_rows: DataFrame) -> DataFrame:
        validated = self.replay.validate(bronze_rows, expectations=self.expectations)
        return validated.withColumn("raw_sha256", F.expr(_raw_sha256()))  # type: ignore[union-attr]

    def _plan(self, reason_like: str | None, since: datetime | None) -> DataFrame:
        """The chosen records, each with whether it now passes and, if so, its outcome."""
        chosen = self._chosen(reason_like, since).persist()
        self._cached.append(chosen)
        if chosen.isEmpty():  # nothing to look up in bronze or silver
            return chosen.withColumn("outcome", F.lit(None).cast("string"))
        validated = self._validated(self._bronze_rows(chosen))
        key = list(self.replay.key)
        passing = validated.where(F.col("reason").isNull()).select(*IDENTITY, *key).dropDuplicates()
        plan = chosen.join(passing.withColumn("passes", F.lit(True)), list(IDENTITY), "left")
        plan = plan.withColumn("passes", F.coalesce("passes", F.lit(False)))
        if key:
            held = (
                read_table(self.spark, self.silver)
                .select(*key)
                .join(passing.select(*key).distinct(), key, "left_semi")
            )
            plan = plan.join(held.withColumn("held", F.lit(True)), key, "left")
            first = Window.partitionBy(*key, "passes").orderBy(*IDENTITY, "reason")
            duplicate = F.col("held").isNotNull() | (F.row_number().over(first) > 1)
        else:
            duplicate = F.lit(False)
        outcome = F.when(F.col("passes"), F.when(duplicate, DUPLICATE).otherwise(PROMOTED))
        plan = plan.withColumn("outcome", outcome).drop(*key, "held").persist()
        self._cached.append(plan)
        return plan

    def _counts(self, plan: DataFrame) -> ReplayResult:
        """The records of a plan, those that pass, and how many are promoted or duplicates."""
        row = plan.agg(
            F.count(F.lit(1)),
            F.count_if(F.col("outcome").isNotNull()),
            F.count_if(F.col("outcome") == PROMOTED),
            F.count_if(F.col("outcome") == DUPLICATE),
        ).first()
        return ReplayResult(self.quarantine.key, *(int(v) for v in row))

    def _write_plan(self, plan: DataFrame, replay_id: int) -> None:
        """Fix the replay's input: one log row per record that now passes (one commit)."""
        plan_batch(self.spark, self.checkpoint, REPLAY_QUERY_ID, replay_id, int(time.time() * 1000))
        rows = plan.where(F.col("outcome").isNotNull()).select(
            F.lit(replay_id).cast("bigint").alias("replay_id"),
            F.lit(self.quarantine.key).alias("quarantine"),
            F.lit(self.flow.name).alias("stream"),
            "outcome",
            "record_key",
            "reason",
            "_source_file",
            "_ingested_at",
            "raw_sha256",
            F.lit(self.settings).alias("settings"),
            F.current_timestamp().alias("recorded_at"),
        )
        append_batch(rows, self.log)

    @property
    def checkpoint(self) -> str:
        """Where the replays of this quarantine keep what a stream keeps in its checkpoint."""
        return f"{self.config.checkpoints_folder}/_quarantine_replay/{self.flow.name}"

    def _execute(self, replay_id: int, resumed: bool = False) -> ReplayResult:
        """Promote replay ``replay_id``'s planned records, then take them out of the quarantine."""
        planned = self._history().where(
            (F.col("replay_id") == replay_id) & F.col("outcome").isin(PROMOTED, DUPLICATE)
        )
        planned = planned.persist()
        bronze_rows = self._bronze_rows(planned).persist()
        self._cached += [planned, bronze_rows]
        if resumed:
            self._use_settings(self._planned_settings(planned))
            first = planned.agg(F.unix_millis(F.min("recorded_at"))).first()[0]
            plan_batch(self.spark, self.checkpoint, REPLAY_QUERY_ID, replay_id, int(first))
        stream = f"replay_{self.flow.name}"
        self.flow.batch_function(self.config, self.checkpoint, stream)(bronze_rows, replay_id)
        for flow in self.also:  # the same change records' history (each declares a batch)
            flow.batch_function(self.config, self.checkpoint, f"replay_{flow.name}")(
                bronze_rows, replay_id
            )
        pause_point("quarantine_replay:promoted")  # crash tests only
        feed_fused(
            self.spark,
            self.config,
            self.feeds,
            lambda: self._inserted(planned, bronze_rows),
            replay_id,
            lambda _feed: self.checkpoint,
            "replay",
        )
        pause_point("quarantine_replay:fed")  # crash tests only
        self._delete_from_quarantine(planned)
        pause_point("quarantine_replay:deleted")  # crash tests only
        finished = self.spark.createDataFrame(
            [(replay_id, self.quarantine.key, self.flow.name, FINISHED, self.settings)],
            "replay_id BIGINT, quarantine STRING, stream STRING, outcome STRING, settings STRING",
        ).withColumn("recorded_at", F.current_timestamp())
        append_batch(finished, self.log)
        return replace(self._counts(planned), replay_id=replay_id, resumed=resumed)

    def _inserted(self, planned: DataFrame, bronze_rows: DataFrame) -> DataFrame:
        """The silver rows the replay inserted: those whose key a promoted record has (no other
        writer added those keys: they were not in silver when planned, and the locks held)."""
        key = list(self.replay.key)
        promoted = planned.where(F.col("outcome") == PROMOTED).select(*IDENTITY)
        keys = self._validated(bronze_rows).join(promoted, list(IDENTITY), "left_semi")
        return read_table(self.spark, self.silver).join(
            keys.select(*key).distinct(), key, "left_semi"
        )

    def _delete_from_quarantine(self, planned: DataFrame) -> None:
        """Delete the planned records from the quarantine (again: nothing is left to delete)."""
        allow_deletes(self.spark, self.quarantine)  # a quarantine created before replays
        records = planned.select(*IDENTITY).distinct()
        statement = (
            f"MERGE INTO {self.quarantine.sql_name} AS t USING {{records}} AS s "
            f"ON {_SAME_RECORD} WHEN MATCHED THEN DELETE"
        )
        retry_on_conflict(
            lambda: self.spark.sql(statement, records=records),
            f"delete replayed records from {self.quarantine.key}",
        )


def render_results(results: Sequence[ReplayResult], dry_run: bool) -> str:
    """The results for people, a line per quarantine."""
    if not results:
        return "no quarantine table in this lake yet"
    return "\n".join(r.describe(dry_run) for r in results)
