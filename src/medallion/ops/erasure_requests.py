"""Erasure requests: an erasure asked for by the subject's keyed hash, carried out later by a
job that never sees the id in its parameters (the bundle's ``medallion_erase`` job).

``medallion erase --request --subject ID`` checks the id as an erasure would (a subject's, or
``--suppress-if-absent``) and appends a row to ``<lake>/_system/erasure_requests``: a request
id, the id's keyed hash and the key's check value, never the id. The job (or ``medallion erase
--pending``) takes each request not carried out yet, finds the id again among the values of
the declared subject columns and fields by their keyed hashes, and erases it.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from medallion.config import Config
from medallion.declarations import RAW_COLUMN
from medallion.erasure_key import ErasureKey, keyed_hash, keyed_hash_column
from medallion.erasure_log import erasure_ends
from medallion.errors import ConfigError
from medallion.ops.erase import (
    erase_hashed,
    erasure_scope,
    nothing_to_erase,
    validate_subject,
)
from medallion.ops.erasure_plan import ErasureResult, subject_found, subject_tables
from medallion.sql_names import TableRef
from medallion.subjects import Subjects, subject_values
from medallion.tables import append_rows, create_delta_table, read_table, table_exists

REQUESTS_SCHEMA = (
    "request_id STRING, subject_hash STRING, key_check STRING, suppress_if_absent BOOLEAN, "
    "requested_at TIMESTAMP"
)


def requests_table(config: Config) -> TableRef:
    """The lake's erasure requests."""
    return config.system_table("erasure_requests")


def request_erasure(
    spark: SparkSession, config: Config, subject: str, suppress_if_absent: bool = False
) -> str:
    """Record a request to erase ``subject``; its id. Refused as an erasure would be: an id no
    table holds, unless ``suppress_if_absent``."""
    validate_subject(subject)
    config, key = erasure_scope(spark, config)
    if not suppress_if_absent and not subject_found(spark, config, subject):
        raise nothing_to_erase(config)
    table = requests_table(config)
    create_delta_table(spark, table, REQUESTS_SCHEMA, {})
    request_id = uuid.uuid4().hex[:12]
    row = {
        "request_id": request_id,
        "subject_hash": keyed_hash(key, subject),
        "key_check": key.check,
        "suppress_if_absent": suppress_if_absent,
        "requested_at": datetime.now(timezone.utc),
    }
    append_rows(spark, table, [row], REQUESTS_SCHEMA)
    return request_id


def pending_requests(spark: SparkSession, config: Config) -> list[dict]:
    """The requests whose subject has no finished erasure since the request, oldest first."""
    table = requests_table(config)
    if not table_exists(spark, table):
        return []
    requests = [r.asDict() for r in read_table(spark, table).orderBy("requested_at").collect()]
    finished = _finished_at(spark, config)
    return [r for r in requests if finished.get(r["subject_hash"], _NEVER) < r["requested_at"]]


_NEVER = datetime.min


def _finished_at(spark: SparkSession, config: Config) -> dict[str, datetime]:
    """When each subject's latest finished erasure finished, by keyed hash."""
    ends = erasure_ends(spark, config)
    latest: dict[str, datetime] = {}
    for row in [] if ends is None else ends.where(F.col("finished_at").isNotNull()).collect():
        latest[row.subject_hash] = max(latest.get(row.subject_hash, _NEVER), row.finished_at)
    return latest


def find_subject(
    spark: SparkSession, config: Config, key: ErasureKey, subject_hash: str
) -> str | None:
    """The id whose keyed hash is ``subject_hash``, among the values the tables of
    ``config``'s pipelines hold in their subject columns and fields; None when none does.
    Silver's typed columns are looked at before the raw lines."""
    hashed = keyed_hash_column(key)
    for table, subjects in _typed_first(spark, config):
        frame = read_table(spark, table)
        values = subject_values(frame.columns, subjects)
        if not values:
            continue
        ids = frame.select(F.explode(F.array(*values)).alias("id")).where(F.col("id").isNotNull())
        found = ids.distinct().where(hashed(F.col("id")) == subject_hash).first()
        if found is not None:
            return str(found.id)
    return None


def _typed_first(spark: SparkSession, config: Config) -> list[tuple[TableRef, Subjects]]:
    """The existing tables of pipelines with subjects, typed tables before raw lines."""
    tables = [(t, ref, subjects) for _, t, ref, subjects in subject_tables(spark, config)]
    tables.sort(key=lambda found: RAW_COLUMN in found[0].columns)
    return [(ref, subjects) for _, ref, subjects in tables]


def erase_requested(
    spark: SparkSession,
    config: Config,
    request_id: str | None = None,
    dry_run: bool = False,
    vacuum: bool = False,
) -> list[ErasureResult]:
    """Carry out the pending request ``request_id`` (None: every pending request), each as
    :func:`~medallion.ops.erase.erase_subject` of its subject; the results in order."""
    config, key = erasure_scope(spark, config)
    pending = pending_requests(spark, config)
    if request_id:
        pending = [r for r in pending if r["request_id"] == request_id]
        if not pending:
            raise ConfigError(f"no pending erasure request {request_id!r} in this lake")
    results = []
    for request in pending:
        if request["key_check"] != key.check:
            raise ConfigError(
                f"erasure request {request['request_id']} was made under another erasure key "
                f"(check {request['key_check']}, this one {key.check})"
            )
        subject = find_subject(spark, config, key, request["subject_hash"])
        results.append(
            erase_hashed(
                spark,
                config,
                key,
                request["subject_hash"],
                subject,
                dry_run,
                vacuum,
                suppress_if_absent=bool(request["suppress_if_absent"]),
            )
        )
    return results
