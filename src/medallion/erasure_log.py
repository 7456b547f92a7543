"""The erasure log, ``<lake>/_system/erasures``: what each erasure removed, table by table,
without the personal data (the subject as a salted hash), and what streams read from it.

- **Erased stays erased.** Every input line that holds an erased subject's id as a JSON string
  is dropped before bronze (:func:`without_erased`), and counted in the log (``dropped``).
- A stream that reads a table's Change Data Feed skips the versions an erasure wrote there: an
  erasure's DELETE is no change of the subject to report (it would put the subject's last
  values back into the audit trail).
"""

from __future__ import annotations

import json
import secrets
from datetime import datetime, timezone
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.config import Config
from medallion.errors import ConfigError
from medallion.sql_names import TableRef
from medallion.subjects import hashed
from medallion.tables import append_rows, create_delta_table, read_table, table_exists

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
SALT_SCHEMA = "salt STRING, created_at TIMESTAMP"
# The name of the observed metric that counts a dataset's dropped lines, in a batch's progress.
DROPPED_METRIC = "erased_lines_"
# A JSON string as it stands in a line, quotes included.
_JSON_STRING = r'"(?:[^"\\]|\\.)*"'


def erasures_table(config: Config) -> TableRef:
    """The lake's erasure log."""
    return config.system_table("erasures")


def unfinished_erasure(spark: SparkSession, config: Config) -> tuple[int, str] | None:
    """(id, subject hash) of the lake's last erasure when it never finished."""
    log = erasures_table(config)
    if not table_exists(spark, log):
        return None
    last = (
        read_table(spark, log)
        .groupBy("erasure_id")
        .agg(
            F.max(F.when(F.col("action") == STARTED, F.col("subject_hash"))).alias("subject"),
            F.count_if(F.col("action") == FINISHED).alias("finished"),
        )
        .orderBy(F.desc("erasure_id"))
        .first()
    )
    if last is None or last.finished:
        return None
    return int(last.erasure_id), str(last.subject)


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


def erasure_salt(spark: SparkSession, config: Config, create: bool = False) -> str | None:
    """The lake's salt of subject hashes (the first row wins), made when ``create`` and missing."""
    table = config.system_table("erasure_salt")
    exists = table_exists(spark, table)
    if create and (not exists or read_table(spark, table).isEmpty()):
        create_delta_table(spark, table, SALT_SCHEMA, {})
        salt = {"salt": secrets.token_hex(32), "created_at": datetime.now(timezone.utc)}
        append_rows(spark, table, [salt], SALT_SCHEMA)
        exists = True
    if not exists:
        return None
    row = read_table(spark, table).orderBy("created_at", "salt").first()
    return None if row is None else row.salt


def _erased_literals(spark: SparkSession, config: Config) -> tuple[str, list[str]] | None:
    """The salt and the hashes of the erased subjects' ids as JSON strings (``detail`` of each
    erasure's ``started`` row); None when nothing was erased in the lake."""
    log = erasures_table(config)
    if not table_exists(spark, log):
        return None
    rows = read_table(spark, log).where(F.col("action") == STARTED).select("detail").collect()
    hashes = sorted({r.detail for r in rows if r.detail})
    salt = erasure_salt(spark, config)
    return (salt, hashes) if hashes and salt else None


def without_erased(
    spark: SparkSession, config: Config, dataset: str, lines: DataFrame
) -> DataFrame:
    """``lines`` (``value``: a line as it landed) without those that hold an erased subject's
    id as a JSON string, counted as the observed metric ``erased_lines_<dataset>`` of the
    batch's progress. The lines as they are when nothing was erased."""
    erased = _erased_literals(spark, config)
    if erased is None:
        return lines
    salt, hashes = erased
    strings = F.regexp_extract_all(F.col("value"), F.lit(_JSON_STRING), 0)
    held = F.exists(strings, lambda s: hashed(s, salt).isin(hashes))
    held = F.coalesce(held, F.lit(False))
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
