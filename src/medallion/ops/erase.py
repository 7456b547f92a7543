"""``medallion erase``: a data subject's rows removed from every table of the chosen pipelines,
gold recomputed without them, and the erasure logged without the id (docs/governance.md).

An erasure of one subject holds the locks of every stream of the chosen pipelines (a ``run
--stream`` of them pauses its queries and gives them up meanwhile: streams/pausing.py; another
run is waited for as long as a stop takes, then refused), drains the lake first, as an
available-now run of the streams that read tables, so that none has the subject's records
still to read, and then takes the steps of ops/erasure_steps.py.

An id that no declared subject column or field of any table holds is refused before anything
is written: it is not a subject's (a country, a product), or their data has not arrived, which
``suppress_if_absent`` records as a suppression alone.
"""

from __future__ import annotations

from dataclasses import replace

from pyspark.sql import SparkSession

from medallion.config import Config
from medallion.declarations import Table
from medallion.deployment import pipelines_of
from medallion.erasure_key import ErasureKey, erasure_key, keyed_hash
from medallion.erasure_log import erased_subjects, unfinished_erasure
from medallion.errors import ConfigError
from medallion.locks import stream_locks
from medallion.ops.erasure_plan import ErasureResult, erasure_plan, subject_found
from medallion.ops.erasure_steps import Erasure
from medallion.ops.maintain import DEFAULT_RETENTION_HOURS, maintain
from medallion.streams.pausing import pause_request
from medallion.streams.runner import run_available_now

ERASURE_LOCK = "_erasure"  # one erasure at a time in a lake
# How much longer than a stop's timeout an erasure waits for a paused run's locks.
PAUSE_MARGIN_SECONDS = 30.0


def erase_subject(
    spark: SparkSession,
    config: Config,
    subject: str,
    dry_run: bool = False,
    vacuum: bool = False,
    suppress_if_absent: bool = False,
) -> ErasureResult:
    """Erase ``subject`` from ``config``'s pipelines that declare data subjects (every one by
    default). A continuous run of them pauses meanwhile; raises
    :class:`~medallion.locks.LockHeld` when another run holds their streams for longer than a
    stop takes. Needs the erasure key (medallion/erasure_key.py).

    An id that no table holds in a subject column or field is refused (:class:`ConfigError`,
    nothing written), unless ``suppress_if_absent``: then it is recorded as a suppression
    alone, and its lines that land later are dropped.

    ``vacuum``: then VACUUM the tables it touched, with maintenance's retention and guard
    (docs/governance.md: when the rows are gone from time travel and from storage)."""
    validate_subject(subject)
    config, key = erasure_scope(spark, config)
    return erase_hashed(
        spark, config, key, keyed_hash(key, subject), subject, dry_run, vacuum, suppress_if_absent
    )


def validate_subject(subject: str) -> None:
    """Refuse an id that is empty, too long or holds a control character (not echoed)."""
    if not subject.strip() or len(subject) > 1000 or not subject.isprintable():
        raise ConfigError("the subject's id must be printable text of 1 to 1000 characters")


def erasure_scope(spark: SparkSession, config: Config) -> tuple[Config, ErasureKey]:
    """``config`` narrowed to its pipelines that declare subjects, and the erasure key, which
    must be the one the lake's erasures were made with."""
    chosen = [p.name for p in pipelines_of(config) if p.subjects is not None]
    if not chosen:
        raise ConfigError("none of the chosen pipelines declares data subjects")
    key = erasure_key(required=True)
    config = config.with_options(pipelines=tuple(chosen))
    erased_subjects(spark, config).key()  # refuses a key other than the lake's erasures'
    return config, key


def nothing_to_erase(config: Config) -> ConfigError:
    """The refusal of an id that no table of ``config``'s pipelines holds (not repeated)."""
    chosen = pipelines_of(config)
    fields = sorted({c for p in chosen if p.subjects for c in p.subjects.column_names})
    return ConfigError(
        f"nothing to erase: no table of {', '.join(p.name for p in chosen)} holds this id in a "
        f"subject column or field ({', '.join(fields)}), raw lines included; it is no "
        "subject's id (a country or a product is not), or their data has not arrived yet: "
        "--suppress-if-absent records it as a suppression alone"
    )


def erase_hashed(
    spark: SparkSession,
    config: Config,
    key: ErasureKey,
    subject_hash: str,
    subject: str | None,
    dry_run: bool = False,
    vacuum: bool = False,
    suppress_if_absent: bool = False,
) -> ErasureResult:
    """:func:`erase_subject` of the subject whose keyed hash is ``subject_hash``, its id
    ``subject`` (None: no table holds it, found by ops/erasure_requests.py)."""
    chosen = pipelines_of(config)
    unfinished = unfinished_erasure(spark, config)
    resuming = unfinished is not None and unfinished[1] == subject_hash
    if dry_run:
        plan = tuple(erasure_plan(spark, config, subject)) if subject is not None else ()
        if not resuming and not any(t.touched for t in plan):
            raise nothing_to_erase(config)
        return ErasureResult(None, None, plan)
    # Only whether anything is there: the erasure counts what it removes itself.
    found = resuming or (subject is not None and subject_found(spark, config, subject))
    if not found and not suppress_if_absent:
        raise nothing_to_erase(config)
    streams = [ERASURE_LOCK, *(f.name for p in chosen for f in p.flows)]
    # A `run --stream` holding the streams pauses for the erasure (streams/pausing.py): its
    # locks come free once its batches in flight have ended.
    asked = [pause_request(p.name) for p in chosen]
    wait = config.stop_timeout_seconds + PAUSE_MARGIN_SECONDS
    with (
        stream_locks(config.checkpoints_folder, asked, "medallion erase"),
        stream_locks(config.checkpoints_folder, streams, "medallion erase", wait_seconds=wait),
    ):
        erasure = Erasure(spark, config, key, subject_hash, subject)
        if not found:
            return erasure.suppress()
        # Every stream that reads a table reads what it has not yet: none of them can bring
        # the subject's rows back afterwards. Lines still landing are read by the next run.
        if erasure.resuming is None:  # an interrupted one drained the lake before it started
            delta_fed = [f for p in chosen for f in p.flows if isinstance(f.source, Table)]
            run_available_now(spark, config, delta_fed, register_names=False, locked=True)
        result = erasure.run(chosen)
    if vacuum:
        touched = [t.table for t in result.tables if t.touched]
        done = maintain(spark, config, touched, DEFAULT_RETENTION_HOURS, run_optimize=False)
        result = replace(result, vacuumed_files=sum(m.vacuumed_files for m in done))
    return result
