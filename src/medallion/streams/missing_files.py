"""Landed files deleted after a stream listed them, before it read them.

Spark's file source lists a batch's files when it plans the batch and reads them later. A file
deleted in between is skipped without a word when the batch is replayed after a crash (Spark
drops a listed path that no longer exists), or fails the batch when it vanishes mid-read. So:

- before a run, a batch planned but not committed whose files are gone stops the stream with
  one line naming the file and the two ways out (:func:`missing_files_refusal`);
- ``--skip-missing-files`` (``Config.skip_missing_files``) accepts the loss: the rest is read;
- after every run, every missing file of the batches committed since the last check that is
  not in bronze is recorded in ``<lake>/_system/data_gaps`` (:func:`record_missing_files`), so
  a file lost in the moment between listing and reading is on record too.

Only local (or FUSE-mounted) checkpoints of the ``files`` source are checked.
"""

from __future__ import annotations

import logging
import os

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from medallion.config import Config
from medallion.errors import is_failure
from medallion.gaps import Gap, checked_through, gaps_table, mark_checked, record_gaps
from medallion.storage import local_path as local_folder
from medallion.streams.checkpoint_files import (
    committed_batch,
    local_path,
    note_pending_reads,
    pending_files,
    source_log,
)
from medallion.tables import read_table

log = logging.getLogger(__name__)

CHECK = "missing_files"


def checks_files(config: Config, stream: str, reads: str) -> str | None:
    """The local checkpoint of a stream that reads landing files with the file source, or
    None when the stream reads something else (Kafka, Auto Loader, a Delta table) or its
    checkpoint is not local."""
    if not reads.startswith("landing/") or config.source != "files":
        return None
    if config.file_source != "files":
        return None
    return local_folder(config.checkpoint(stream))


def _missing(path: str) -> bool:
    return not os.path.exists(local_path(path))


def missing_files_refusal(config: Config, stream: str, reads: str) -> str | None:
    """Why ``stream`` must not start: a file its pending batch listed is gone, and Spark would
    skip it silently. None when nothing is missing or the operator accepted the loss."""
    checkpoint = checks_files(config, stream, reads)
    if checkpoint is None:
        return None
    batch, pending = pending_files(checkpoint)
    gone = sorted(local_path(path) for path, _ in pending if _missing(path))
    if not gone or config.skip_missing_files:
        note_pending_reads(checkpoint, pending)  # files put back are read as they are now
        return None
    what = "a landed file" if len(gone) == 1 else f"{len(gone)} landed files (the first shown)"
    return (
        f"stream '{stream}': {what} listed for batch {batch} but not read yet is gone from "
        f"the landing folder: {gone[0]}. Put it back and run again; or accept the loss with "
        "`medallion run ... --skip-missing-files`, which reads the rest and records each "
        f"missing file in {gaps_table(config).key} (docs/operations.md)"
    )


def missing_file_hint(text: str) -> str | None:
    """The way out, for a stream that failed because a listed file vanished while it read."""
    if not is_failure(text, "file missing"):
        return None
    return (
        "a landed file was deleted after the stream listed it: put it back and run again, or "
        "run with --skip-missing-files to read the rest and record the gap (docs/operations.md)"
    )


def start_checking(config: Config, stream: str, reads: str) -> None:
    """Give a stream its first watermark: a new checkpoint is checked from its first batch,
    one made before these checks from where it stands (its history is not scanned)."""
    checkpoint = checks_files(config, stream, reads)
    if checkpoint is None or checked_through(checkpoint, CHECK) is not None:
        return
    committed = committed_batch(checkpoint)
    os.makedirs(checkpoint, exist_ok=True)
    mark_checked(checkpoint, CHECK, -1 if committed is None else committed)


def record_missing_files(
    spark: SparkSession, config: Config, stream: str, reads: str, bronze_key: str
) -> list[Gap]:
    """Record every file of the batches committed since the last check that is gone and not
    in bronze (``bronze_key``): it was listed, then deleted before it was read."""
    checkpoint = checks_files(config, stream, reads)
    if checkpoint is None:
        return []
    since, committed = checked_through(checkpoint, CHECK), committed_batch(checkpoint)
    if since is None or committed is None or committed <= since:
        return []
    candidates = {
        path: batch
        for path, _, batch in source_log(checkpoint)
        if since < batch <= committed and _missing(path)
    }
    gaps = []
    if candidates:
        bronze = read_table(spark, config.table(bronze_key))
        read = {
            row._source_file
            for row in bronze.where(F.col("_source_file").isin(list(candidates)))
            .select("_source_file")
            .distinct()
            .collect()
        }
        gaps = [
            Gap(
                stream=stream,
                kind="missing file",
                file_path=local_path(path),
                detail=f"listed for batch {batch}, deleted before it was read",
            )
            for path, batch in sorted(candidates.items())
            if path not in read
        ]
        record_gaps(spark, config, gaps)
        if gaps:
            log.warning(
                "%s: %d landed files were deleted before they were read (the first: %s); "
                "recorded in %s",
                stream,
                len(gaps),
                gaps[0].file_path,
                gaps_table(config).key,
            )
    mark_checked(checkpoint, CHECK, committed)
    return gaps
