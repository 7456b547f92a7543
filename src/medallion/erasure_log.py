"""The erasure log, ``<lake>/_system/erasures``: what each erasure removed, table by table,
without the personal data (the subject as its keyed hash, medallion/erasure_key.py), and what
streams read from it.

- **Erased stays erased.** Every input line one of whose declared subject fields holds an
  erased subject's id is dropped before bronze (:func:`without_erased`), and counted in the
  log (``dropped``). Lakes erased before the erasure key keep dropping their subjects' lines
  by the old salted hashes of every JSON string of a line, while the salt is there.
- A stream that reads a table's Change Data Feed skips the versions an erasure wrote there: an
  erasure's DELETE is no change of the subject to report (it would put the subject's last
  values back into the audit trail).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.config import Config
from medallion.erasure_key import ErasureKey, erasure_key, keyed_hash_column
from medallion.errors import ConfigError
from medallion.sql_names import TableRef
from medallion.subjects import legacy_hashed, raw_field
from medallion.tables import append_rows, read_table, table_exists

ERASURES_SCHEMA = (
    "erasure_id BIGINT, subject_hash STRING, pipeline STRING, table_key STRING, action STRING, "
    "rows BIGINT, version BIGINT, detail STRING, recorded_at TIMESTAMP"
)
STARTED, KEYS, DELETED, RECOMPUTED, PROMOTED, FINISHED, DROPPED = (
    "started",
    "keys",
    "deleted",
    "recomputed",
    "promoted",
    "finished",
    "dropped",
)
# What a ``started`` row's detail says of an erasure hashed under the erasure key.
KEYED_SCHEME = "hmac-sha256"
# The name of the observed metric that counts a dataset's dropped lines, in a batch's progress.
DROPPED_METRIC = "erased_lines_"
# A legacy ``started`` row's detail: a salted SHA-256, hex.
_LEGACY_DETAIL = re.compile("[0-9a-f]{64}")
# A JSON string as it stands in a line, quotes included.
_JSON_STRING = r'"(?:[^"\\]|\\.)*"'


def erasures_table(config: Config) -> TableRef:
    """The lake's erasure log."""
    return config.system_table("erasures")


def erasure_ends(spark: SparkSession, config: Config) -> DataFrame | None:
    """One row per erasure of the lake: ``erasure_id``, the ``subject_hash`` it started
    with, and when it finished (``finished_at``, NULL while it has not); None without a log."""
    log = erasures_table(config)
    if not table_exists(spark, log):
        return None
    action = F.col("action")
    return (
        read_table(spark, log)
        .groupBy("erasure_id")
        .agg(
            F.max(F.when(action == STARTED, F.col("subject_hash"))).alias("subject_hash"),
            F.max(F.when(action == FINISHED, F.col("recorded_at"))).alias("finished_at"),
        )
    )


def unfinished_erasure(spark: SparkSession, config: Config) -> tuple[int, str] | None:
    """(id, subject hash) of the lake's last erasure when it never finished."""
    ends = erasure_ends(spark, config)
    last = None if ends is None else ends.orderBy(F.desc("erasure_id")).first()
    if last is None or last.finished_at is not None:
        return None
    return int(last.erasure_id), str(last.subject_hash)


def erased_versions(spark: SparkSession, config: Config, table_key: str) -> list[int]:
    """The versions of ``table_key`` that erasures wrote. Raises :class:`ConfigError` while an
    erasure is unfinished: its versions are not all logged yet."""
    unfinished = unfinished_erasure(spark, config)
    if unfinished is not None:
        raise ConfigError(
            f"erasure {unfinished[0]} (subject {unfinished[1][:12]}…) was interrupted: run the "
            "same `medallion erase --subject ...` again to finish it before the streams go on"
        )
    log = erasures_table(config)
    if not table_exists(spark, log):
        return []
    rows = (
        read_table(spark, log)
        .where((F.col("table_key") == table_key) & F.col("version").isNotNull())
        .select("version")
        .collect()
    )
    return sorted({int(r.version) for r in rows})


def started_detail(key: ErasureKey) -> str:
    """The ``detail`` of a ``started`` row: the scheme and the key's check value."""
    return json.dumps({"scheme": KEYED_SCHEME, "key_check": key.check})


@dataclass(frozen=True)
class ErasedSubjects:
    """The subjects erased in a lake: keyed hashes of their ids, the checks of the keys they
    were hashed under, and the hashes of erasures from before the key with their salt."""

    keyed: frozenset[str] = frozenset()
    key_checks: frozenset[str] = frozenset()
    legacy: frozenset[str] = frozenset()
    legacy_salt: str | None = None

    def key(self) -> ErasureKey | None:
        """This process's erasure key, checked against the lake's: None when the lake holds no
        keyed erasure; :class:`ConfigError` when it does and the key is missing or another."""
        if not self.keyed:
            return None
        key = erasure_key(required=False)
        if key is None:
            raise ConfigError(
                "this lake has erasures: its streams need the erasure key they were made with "
                "to keep dropping the erased subjects' lines; set MEDALLION_ERASURE_KEY "
                "(on Databricks, the secret the bundle's erasure_key_scope names)"
            )
        if key.check not in self.key_checks:
            raise ConfigError(
                f"MEDALLION_ERASURE_KEY is not the key this lake's erasures were made with "
                f"(its check is {key.check}, theirs {', '.join(sorted(self.key_checks))})"
            )
        return key


def erased_subjects(spark: SparkSession, config: Config) -> ErasedSubjects:
    """What the lake's erasure log says was erased (``started`` rows: every erasure, finished
    or not, and every suppression)."""
    log = erasures_table(config)
    if not table_exists(spark, log):
        return ErasedSubjects()
    started = read_table(spark, log).where(F.col("action") == STARTED)
    keyed, checks, legacy = set(), set(), set()
    for row in started.select("subject_hash", "detail").collect():
        detail = row.detail or ""
        if _LEGACY_DETAIL.fullmatch(detail):
            legacy.add(detail)  # the salted hash of the id as a JSON string
            continue
        scheme = json.loads(detail)
        keyed.add(row.subject_hash)
        checks.add(scheme["key_check"])
    salt = legacy_salt(spark, config) if legacy else None
    return ErasedSubjects(frozenset(keyed), frozenset(checks), frozenset(legacy), salt)


def legacy_salt(spark: SparkSession, config: Config) -> str | None:
    """The salt of the erasures made before the erasure key (the first row wins); None once
    it is retired (docs/governance.md)."""
    table = config.system_table("erasure_salt")
    if not table_exists(spark, table):
        return None
    row = read_table(spark, table).orderBy("created_at", "salt").first()
    return None if row is None else row.salt


def without_erased(
    spark: SparkSession,
    config: Config,
    dataset: str,
    fields: Sequence[str],
    lines: DataFrame,
) -> DataFrame:
    """``lines`` (``value``: a line as it landed) without those whose subject ``fields`` hold
    an erased subject's id, counted as the observed metric ``erased_lines_<dataset>`` of the
    batch's progress. The lines as they are when nothing was erased."""
    erased = erased_subjects(spark, config)
    conditions = []
    key = erased.key()
    if key is not None:
        hashed = keyed_hash_column(key)
        hashes = sorted(erased.keyed)
        conditions += [hashed(raw_field(F.col("value"), f)).isin(hashes) for f in fields]
    if erased.legacy and erased.legacy_salt:
        salt, hashes = erased.legacy_salt, sorted(erased.legacy)
        strings = F.regexp_extract_all(F.col("value"), F.lit(_JSON_STRING), 0)
        conditions.append(F.exists(strings, lambda s: legacy_hashed(s, salt).isin(hashes)))
    if not conditions:
        return lines
    held = F.coalesce(reduce(lambda a, b: a | b, conditions), F.lit(False))
    counted = lines.observe(f"{DROPPED_METRIC}{dataset}", F.count_if(held).alias("dropped"))
    return counted.where(~held)


def record_dropped(spark: SparkSession, config: Config, progress: list[dict[str, Any]]) -> None:
    """Append to the erasure log the lines each batch dropped, from the batches' progress."""
    rows = []
    for event in progress:
        metrics = json.loads(event.get("progress_json") or "{}").get("observedMetrics") or {}
        for name, values in metrics.items():
            dropped = int((values or {}).get("dropped") or 0)
            if name.startswith(DROPPED_METRIC) and dropped:
                rows.append(
                    {
                        "erasure_id": None,
                        "subject_hash": None,
                        "pipeline": None,
                        "table_key": f"landing/{name.removeprefix(DROPPED_METRIC)}",
                        "action": DROPPED,
                        "rows": dropped,
                        "version": None,
                        "detail": json.dumps(
                            {"stream": event["query_name"], "batch": event["batch_id"]}
                        ),
                        "recorded_at": event.get("timestamp"),
                    }
                )
    if rows:
        append_rows(spark, erasures_table(config), rows, ERASURES_SCHEMA)
