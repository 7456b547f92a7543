"""The steps of one erasure of one subject, started or resumed (ops/erase.py starts it):

1. log ``started`` with the subject's keyed hash (medallion/erasure_key.py), and the keyed
   hashes of the keys the subject's silver rows hold (``keys``);
2. gold: each declared aggregate is recomputed in the subject's scope from silver without the
   subject's rows (one ``replaceWhere``), and the rows of tables with a subject column deleted;
   then silver, then bronze: the subject's rows deleted, raw lines and quarantines included.
   Each delete is a MERGE with a one-row source that holds the id: the condition Delta records
   in the table's history names columns, never the id;
3. promote the next copy of each of those keys (a re-sent record under another subject, which
   silver had dropped as a duplicate) through the silver flow's own batch, as if the subject's
   records had never landed; gold follows as after a quarantine replay (ops/replay.py);
4. log ``finished``, and write a Delta checkpoint of every table it changed, so that log
   cleanup can drop the older commits (whose file statistics may hold the id) once their
   retention has passed.

Every write is tagged with the erasure (streams/exactly_once.py) and logged layer by layer: an
erasure interrupted anywhere is finished by the next run of the same erasure, which finds the
writes of a layer not logged yet by their tags.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.config import Config
from medallion.declarations import Pipeline, QuarantineReplay, Table
from medallion.delta_log import commit_actions, commit_info, commit_tags, committed_version
from medallion.erasure_key import ErasureKey, keyed_hash_column
from medallion.erasure_log import (
    DELETED,
    ERASURES_SCHEMA,
    FINISHED,
    KEYS,
    PROMOTED,
    RECOMPUTED,
    STARTED,
    erasures_table,
    started_detail,
    unfinished_erasure,
)
from medallion.errors import ConfigError
from medallion.faults import pause_point
from medallion.ops.erasure_plan import ErasureResult, TableErasure, scope_values
from medallion.sql_names import TableRef
from medallion.streams.exactly_once import BatchWrites, plan_batch
from medallion.streams.fusion import feed_fused
from medallion.subjects import Subjects, scope_predicate, subject_rows
from medallion.tables import (
    allow_deletes,
    append_rows,
    create_delta_table,
    history,
    read_table,
    table_exists,
    write_log_checkpoint,
)

log = logging.getLogger(__name__)

ERASURE_QUERY_ID = "erasure"
_APP = "medallion-erasure"


class Erasure:
    """One erasure of one subject, started or resumed."""

    def __init__(
        self,
        spark: SparkSession,
        config: Config,
        key: ErasureKey,
        subject_hash: str,
        subject: str | None,
    ) -> None:
        self.spark, self.config, self.key, self.hash = spark, config, key, subject_hash
        # None: no table holds the id any more (a suppression alone; a resumed erasure of a
        # request whose rows are all gone): nothing is matched, nothing deleted.
        self.subject = subject
        self.hashed = keyed_hash_column(key)
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
                "interrupted: run it again with its subject's id first (with the erasure key "
                "it was started under)"
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
            # From this row on, the subject's input lines are dropped (erasure_log.py).
            self._record("", "", STARTED, detail=started_detail(self.key))
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
        # A checkpoint after the erasure's commits: log cleanup keeps every commit after the
        # latest checkpoint older than the retention, so this lets it drop the older ones.
        for result in self.results:
            if result.touched:
                write_log_checkpoint(self.spark, self.config.table(result.table))
        return ErasureResult(self.hash, self.erasure_id, tuple(self.results), self.promoted)

    def suppress(self) -> ErasureResult:
        """Record the subject as erased with nothing found to erase: its lines landing from
        now on are dropped."""
        self._start()
        self._record("", "", FINISHED, rows=0)
        self._flush()
        return ErasureResult(self.hash, self.erasure_id, (), suppressed_only=True)

    def _pipeline(self, pipeline: Pipeline, done: set[tuple[str, str]]) -> None:
        subjects = pipeline.subjects
        assert subjects is not None
        present = [t for t in pipeline.tables if table_exists(self.spark, self._ref(t))]
        keyed = [r for r in pipeline.replays if r.key and self._silver(pipeline, r) in present]
        for replay in keyed:  # which keys to promote, before silver loses them
            silver = self._silver(pipeline, replay)
            if (silver.key, KEYS) not in done:
                hashes = self._key_hashes(silver, subjects, replay.key[0])
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

    def _key_hashes(self, silver: Table, subjects: Subjects, key: str) -> list[str]:
        """The keyed hashes of the ``key`` values of the subject's rows in ``silver``."""
        if self.subject is None:
            return []
        rows = read_table(self.spark, self._ref(silver))
        theirs = rows.where(subject_rows(rows.columns, subjects, self.subject))
        return sorted(r.h for r in theirs.select(self.hashed(F.col(key)).alias("h")).collect())

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
        columns = read_table(self.spark, ref).columns
        # The id comes from a one-row source, so that the condition names no value.
        condition = subject_rows(columns, pipeline.subjects, F.col(f"s.{_SUBJECT_COLUMN}"))
        if condition is None:
            return
        if self.writes.written_before(ref, _APP):
            version, metrics = self._tagged_commit(ref)
        elif self.subject is None:
            version, metrics = None, {}
        else:
            allow_deletes(self.spark, ref)  # a table declared append-only gives that up
            source = self.spark.createDataFrame([(self.subject,)], f"{_SUBJECT_COLUMN} STRING")
            self.writes.delete(ref, source, condition, _APP)
            version, metrics = self._own_commit(ref)
        rows = int(metrics.get("numTargetRowsDeleted", metrics.get("numDeletedRows", 0)))
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
        scope = ()
        if self.subject is not None:
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
            candidates = bronze.where(self.hashed(F.col(key)).isin(hashes))
            valid = replay.validate(candidates).where(F.col("reason").isNull())
            rows = candidates.join(valid.select(*IDENTITY).distinct(), list(IDENTITY), "left_semi")
            checkpoint = self._checkpoint(flow.name)
            flow.batch_function(self.config, checkpoint, f"erasure_{flow.name}")(
                rows, self.erasure_id
            )
            silver_rows = read_table(self.spark, self._ref(silver))
            now = silver_rows.where(self.hashed(F.col(key)).isin(hashes))
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
# The one-row source of an erasure's deletes: the column that holds the id.
_SUBJECT_COLUMN = "erased_subject_id"
