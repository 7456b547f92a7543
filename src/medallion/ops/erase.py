"""``medallion erase``: a data subject's rows removed from every table of the chosen pipelines,
gold recomputed without them, and the erasure logged without the id (docs/governance.md).

An erasure of one subject:

1. holds the locks of every stream of the chosen pipelines (a ``run --stream`` of them pauses
   its queries and gives them up meanwhile: streams/pausing.py; another run is waited for as
   long as a stop takes, then refused) and drains the lake first, as an available-now run of
   the streams that read tables: none has the subject's records still to read;
2. logs ``started`` with the subject's salted hash, and the hashes of the keys the subject's
   silver rows hold (``keys``);
3. gold: each declared aggregate is recomputed in the subject's scope from silver without the
   subject's rows (one ``replaceWhere``), and the rows of tables with a subject column deleted;
   then silver, then bronze: the subject's rows deleted, raw lines and quarantines included;
4. promotes the next copy of each of those keys (a re-sent record under another subject, which
   silver had dropped as a duplicate) through the silver flow's own batch, as if the subject's
   records had never landed; gold follows as after a quarantine replay (ops/replay.py);
5. logs ``finished``.

Every write is tagged with the erasure (streams/exactly_once.py) and logged layer by layer: an
erasure interrupted anywhere is finished by the next run of the same erasure, which finds the
writes of a layer not logged yet by their tags.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.config import Config
from medallion.declarations import Pipeline, QuarantineReplay, Table
from medallion.delta_log import commit_actions, commit_info, commit_tags, committed_version
from medallion.deployment import pipelines_of
from medallion.erasure_log import (
    DELETED,
    ERASURES_SCHEMA,
    FINISHED,
    KEYS,
    PROMOTED,
    RECOMPUTED,
    STARTED,
    erasure_salt,
    erasures_table,
    unfinished_erasure,
)
from medallion.errors import ConfigError
from medallion.faults import pause_point
from medallion.locks import stream_locks
from medallion.ops.erasure_plan import TableErasure, erasure_plan, scope_values
from medallion.ops.maintain import DEFAULT_RETENTION_HOURS, maintain
from medallion.sql_names import TableRef
from medallion.streams.exactly_once import BatchWrites, plan_batch
from medallion.streams.fusion import feed_fused
from medallion.streams.pausing import pause_request
from medallion.streams.runner import run_available_now
from medallion.subjects import (
    hashed,
    json_string_literal,
    scope_predicate,
    subject_hash,
    subject_rows,
)
from medallion.tables import (
    allow_deletes,
    append_rows,
    create_delta_table,
    history,
    read_table,
    table_exists,
)

log = logging.getLogger(__name__)

ERASURE_QUERY_ID = "erasure"
ERASURE_LOCK = "_erasure"  # one erasure at a time in a lake
_APP = "medallion-erasure"
# How much longer than a stop's timeout an erasure waits for a paused run's locks.
PAUSE_MARGIN_SECONDS = 30.0


@dataclass(frozen=True)
class ErasureResult:
    """What an erasure removed (or, in a dry run, would), table by table."""

    subject_hash: str | None
    erasure_id: int | None
    tables: tuple[TableErasure, ...]
    promoted: int = 0
    vacuumed_files: int | None = None  # None: no VACUUM asked for

    def as_json(self) -> dict:
        return asdict(self) | {"tables": [asdict(t) | {"scope": len(t.scope)} for t in self.tables]}

    def describe(self, dry_run: bool) -> str:
        """Lines for people: one per table with the subject's rows."""
        touched = [t for t in self.tables if t.rows or t.scope]
        if dry_run:
            head = f"would erase the subject from {len(touched)} tables (dry run; nothing written)"
        else:
            head = f"erasure {self.erasure_id}: the subject is gone from {len(touched)} tables"
            if self.promoted:
                head += f"; {self.promoted} re-sent copies of its keys took their place in silver"
            if self.vacuumed_files is not None:
                head += f"; VACUUM deleted {self.vacuumed_files} files"
        return "\n".join([head, *(f"  {t.describe()}" for t in touched)])


def erase_subject(
    spark: SparkSession,
    config: Config,
    subject: str,
    dry_run: bool = False,
    vacuum: bool = False,
) -> ErasureResult:
    """Erase ``subject`` from ``config``'s pipelines that declare data subjects (every one by
    default). A continuous run of them pauses meanwhile; raises
    :class:`~medallion.locks.LockHeld` when another run holds their streams for longer than a
    stop takes.

    ``vacuum``: then VACUUM the tables it touched, with maintenance's retention and guard
    (docs/governance.md: when the rows are gone from time travel and from storage)."""
    if not subject.strip() or len(subject) > 1000 or not subject.isprintable():
        raise ConfigError("the subject's id must be printable text of 1 to 1000 characters")
    chosen = [p for p in pipelines_of(config) if p.subjects is not None]
    if not chosen:
        raise ConfigError("none of the chosen pipelines declares data subjects")
    config = config.with_options(pipelines=tuple(p.name for p in chosen))
    if dry_run:
        return ErasureResult(None, None, tuple(erasure_plan(spark, config, subject)))
    streams = [ERASURE_LOCK, *(f.name for p in chosen for f in p.flows)]
    # A `run --stream` holding the streams pauses for the erasure (streams/pausing.py): its
    # locks come free once its batches in flight have ended.
    asked = [pause_request(p.name) for p in chosen]
    wait = config.stop_timeout_seconds + PAUSE_MARGIN_SECONDS
    with (
        stream_locks(config.checkpoints_folder, asked, "medallion erase"),
        stream_locks(config.checkpoints_folder, streams, "medallion erase", wait_seconds=wait),
    ):
        # Every stream that reads a table reads what it has not yet: none of them can bring
        # the subject's rows back afterwards. Lines still landing are read by the next run.
        erasure = _Erasure(spark, config, subject)
        if erasure.resuming is None:  # an interrupted one drained the lake before it started
            delta_fed = [f for p in chosen for f in p.flows if isinstance(f.source, Table)]
            run_available_now(spark, config, delta_fed, register_names=False, locked=True)
        result = erasure.run(chosen)
    if vacuum:
        touched = [t.table for t in result.tables if t.rows or t.scope]
        done = maintain(spark, config, touched, DEFAULT_RETENTION_HOURS, run_optimize=False)
        result = replace(result, vacuumed_files=sum(m.vacuumed_files for m in done))
    return result


class _Erasure:
    """One erasure of one subject, started or resumed."""

    def __init__(self, spark: SparkSession, config: Config, subject: str) -> None:
        self.spark, self.config, self.subject = spark, config, subject
        self.salt = erasure_salt(spark, config, create=True) or ""
        self.hash = subject_hash(subject, self.salt)
        self.log = erasures_table(config)
        create_delta_table(spark, self.log, ERASURES_SCHEMA, {})
        self.resuming = self._interrupted()
        self.results: list[TableErasure] = []
        self.promoted = 0
        self.pending: list[dict] = []  # log rows not appended yet (_flush)

    def _interrupted(self) -> int | None:
        """The id of this subject's interrupted erasure, to finish; refused for another's."""
        unfinished = unfinished_erasure(self.spark, self.config)
        if unfinished is None:
            return None
        if unfinished[1] != self.hash:
            raise ConfigError(
                f"erasure {unfinished[0]} of another subject ({unfinished[1][:12]}…) was "
                "interrupted: run it again with its subject's id first"
            )
        log.warning("finishing interrupted erasure %d", unfinished[0])
        return unfinished[0]

    def _start(self) -> None:
        """Start a new erasure, or take up the interrupted one."""
        if self.resuming is not None:
            self.erasure_id = self.resuming
        else:
            latest = read_table(self.spark, self.log).agg(F.max("erasure_id")).first()[0]
            self.erasure_id = int(latest or 0) + 1
            # The id as a JSON string, hashed: what input lines are dropped by from now on.
            literal = subject_hash(json_string_literal(self.subject), self.salt)
            self._record("", "", STARTED, detail=literal)
            self._flush()
        started = self._logged().where(F.col("action") == STARTED)
        self.planned_ms = int(started.agg(F.unix_millis(F.min("recorded_at"))).first()[0])
        self.writes = BatchWrites(self.spark, self.erasure_id, True, self._checkpoint("_tables"))

    def _checkpoint(self, name: str) -> str:
        """Where this erasure's writes as ``name`` keep what a stream's checkpoint holds."""
        checkpoint = f"{self.config.checkpoints_folder}/_erasure/{name}"
        plan_batch(self.spark, checkpoint, ERASURE_QUERY_ID, self.erasure_id, self.planned_ms)
        return checkpoint

    def _record(
        self,
        pipeline: str,
        table_key: str,
        action: str,
        rows: int | None = None,
        version: int | None = None,
        detail: str | None = None,
    ) -> None:
        self.pending.append(
            {
                "erasure_id": self.erasure_id,
                "subject_hash": self.hash,
                "pipeline": pipeline,
                "table_key": table_key,
                "action": action,
                "rows": rows,
                "version": version,
                "detail": detail,
                "recorded_at": datetime.now(timezone.utc),
            }
        )

    def _flush(self) -> None:
        """Append the pending log rows in one commit. A table's row may be lost to a crash
        before its flush: the next run finds the table's tagged commit again."""
        if self.pending:
            append_rows(self.spark, self.log, self.pending, ERASURES_SCHEMA)
            self.pending = []

    def _logged(self) -> DataFrame:
        return read_table(self.spark, self.log).where(F.col("erasure_id") == self.erasure_id)

    def run(self, pipelines: list[Pipeline]) -> ErasureResult:
        self._start()
        done = {(r.table_key, r.action) for r in self._logged().collect()}
        for pipeline in pipelines:
            self._pipeline(pipeline, done)
        self._record("", "", FINISHED)
        self._flush()
        return ErasureResult(self.hash, self.erasure_id, tuple(self.results), self.promoted)

    def _pipeline(self, pipeline: Pipeline, done: set[tuple[str, str]]) -> None:
        subjects = pipeline.subjects
        assert subjects is not None
        present = [t for t in pipeline.tables if table_exists(self.spark, self._ref(t))]
        keyed = [r for r in pipeline.replays if r.key and self._silver(pipeline, r) in present]
        for replay in keyed:  # which keys to promote, before silver loses them
            silver = self._silver(pipeline, replay)
            if (silver.key, KEYS) not in done:
                rows = read_table(self.spark, self._ref(silver))
                theirs = rows.where(subject_rows(rows.columns, subjects, self.subject))
                key = replay.key[0]
                hashes = sorted(
                    r.h for r in theirs.select(hashed(key, self.salt).alias("h")).collect()
                )
                self._record(
                    pipeline.name,
                    silver.key,
                    KEYS,
                    len(hashes),
                    None,
                    json.dumps(hashes),
                )
        self._flush()  # the keys, before silver loses them
        for layer in ("gold", "silver", "bronze"):
            for table in (t for t in present if t.layer == layer):
                action = RECOMPUTED if subjects.recompute_of(table.key) else DELETED
                if (table.key, action) in done:
                    continue
                if action == RECOMPUTED:
                    self._recompute(pipeline, table)
                else:
                    self._delete(pipeline, table)
                pause_point(f"erasure:{table.layer}_{table.name}")  # crash tests only
            self._flush()  # gold's scopes, before silver loses the subject's rows
        for replay in keyed:
            silver = self._silver(pipeline, replay)
            if (silver.key, PROMOTED) not in done:
                self._promote(pipeline, replay, silver)

    def _ref(self, table: Table) -> TableRef:
        return self.config.table(table.key)

    @staticmethod
    def _silver(pipeline: Pipeline, replay: QuarantineReplay) -> Table:
        flow = next(f for f in pipeline.flows if f.name == replay.flow)
        return next(t for t in flow.outputs if t.layer == "silver" and not t.quarantine)

    def _tagged_commit(self, ref: TableRef) -> tuple[int | None, dict]:
        """(version, operation metrics) of the commit this erasure made to ``ref``, found again
        in its history; (None, {}) when it made none."""
        tag = self.writes.tag(_APP).user_metadata()
        row = history(self.spark, ref).where(F.col("userMetadata") == tag).first()
        if row is None:
            return None, {}
        return int(row.version), dict(row.operationMetrics or {})

    def _delete(self, pipeline: Pipeline, table: Table) -> None:
        ref = self._ref(table)
        condition = subject_rows(
            read_table(self.spark, ref).columns, pipeline.subjects, self.subject
        )
        if condition is None:
            return
        if self.writes.written_before(ref, _APP):
            version, metrics = self._tagged_commit(ref)
        else:
            allow_deletes(self.spark, ref)  # a table declared append-only gives that up
            self.writes.delete(ref, condition, _APP)
            version, metrics = self._own_commit(ref)
        rows = int(metrics.get("numDeletedRows", 0))
        self._record(pipeline.name, table.key, DELETED, rows, version)
        self.results.append(TableErasure(pipeline.name, table.key, rows))

    def _own_commit(self, ref: TableRef) -> tuple[int | None, dict]:
        """(version, operation metrics) of the commit this erasure has just made to ``ref``,
        read from the log without a Spark job; (None, {}) when it made none (a DELETE that
        matched no row commits nothing)."""
        try:
            version = committed_version(self.spark, ref)
            actions = commit_actions(self.spark, ref, version) if version is not None else []
        except LookupError:  # a catalog table: its history
            return self._tagged_commit(ref)
        if commit_tags(actions).get(_APP) != self.erasure_id:
            return None, {}
        return version, commit_info(actions).get("operationMetrics", {})

    def _recompute(self, pipeline: Pipeline, table: Table) -> None:
        subjects = pipeline.subjects
        recompute = subjects.recompute_of(table.key)
        ref = self._ref(table)
        scope = scope_values(self.spark, self.config, subjects, table.key, self.subject)
        version, metrics = None, {}
        if self.writes.written_before(ref, _APP):
            version, metrics = self._tagged_commit(ref)
        elif scope:
            predicate = scope_predicate(recompute.scope, scope)
            source = read_table(self.spark, self.config.table(recompute.source))
            others = source.where(~subject_rows(source.columns, subjects, self.subject))
            scoped = recompute.scoped(others).where(predicate)
            new_rows = recompute.rows(self.spark, self.config, scoped).select(*table.columns)
            self.writes.replace_where(ref, new_rows, predicate, _APP)
            version, metrics = self._own_commit(ref)
        # The rows written in the scope: replaceWhere also copies the rows outside it that
        # share a file with a replaced one.
        rows = int(metrics.get("numOutputRows", 0)) - int(metrics.get("numCopiedRows", 0))
        detail = json.dumps([str(v) for v in scope])
        self._record(pipeline.name, table.key, RECOMPUTED, rows, version, detail)
        self.results.append(TableErasure(pipeline.name, table.key, rows, scope))

    def _promote(self, pipeline: Pipeline, replay: QuarantineReplay, silver: Table) -> None:
        """The next copy of each key the subject held goes through the silver flow's batch."""
        logged = self._logged().where(
            (F.col("table_key") == silver.key) & (F.col("action") == KEYS)
        )
        hashes = json.loads(logged.first().detail or "[]")
        flows = {f.name: f for f in pipeline.flows}
        flow = flows[replay.flow]
        key = replay.key[0]
        inserted = 0
        if hashes:
            bronze = read_table(self.spark, self.config.table(flow.source.key))
            candidates = bronze.where(hashed(key, self.salt).isin(hashes))
            valid = replay.validate(candidates).where(F.col("reason").isNull())
            rows = candidates.join(valid.select(*IDENTITY).distinct(), list(IDENTITY), "left_semi")
            checkpoint = self._checkpoint(flow.name)
            flow.batch_function(self.config, checkpoint, f"erasure_{flow.name}")(
                rows, self.erasure_id
            )
            silver_rows = read_table(self.spark, self._ref(silver))
            now = silver_rows.where(hashed(key, self.salt).isin(hashes))
            inserted = now.count()
            feeds = [flows[name] for name in replay.feeds]
            feed_fused(
                self.spark,
                self.config,
                feeds,
                lambda: now,
                self.erasure_id,
                self._checkpoint,
                "erasure",
            )
        self._record(pipeline.name, silver.key, PROMOTED, inserted)
        self.promoted += inserted


# A bronze row's identity: its file, its ingestion time and its line.
IDENTITY = ("_source_file", "_ingested_at", "_raw")
