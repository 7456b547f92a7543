"""Stream sources: landing files (file source or Auto Loader), Kafka topics and Delta tables."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.config import Config
from medallion.delta_log import commit_actions, committed_version, table_id
from medallion.deployment import pipelines_of
from medallion.erasure_log import without_erased
from medallion.source_options import DeltaSourceOptions
from medallion.sql_names import TableRef
from medallion.streams import checkpoint_files
from medallion.streams.kafka import reader_options, resolve_security_options

# The file source forgets files older than ``maxFileAge`` (default 7 days) measured from the
# newest file it has seen, and then never reads a file whose modification time is older: a
# ``cp -p`` backfill, a clock-skewed producer, or any file landing after one with a far-future
# time would be skipped without a word. No age limit: every landed file is read once, whatever
# its time. (Auto Loader has no limit by default; ``cloudFiles.maxFileAge`` is left unset.)
NO_FILE_AGE_LIMIT = "1000000000d"


def landing_lines(spark: SparkSession, config: Config, dataset: str) -> DataFrame:
    """A stream of the lines landed under ``<landing>/<dataset>/``.

    Columns: ``value`` (the line without its ``\\n``), ``_source_file`` and ``_ingested_at``
    (the micro-batch time, identical when a batch is replayed). Files whose names start with
    ``.`` or ``_`` are skipped by both sources: writers land files under a hidden name first.

    Locally this is Spark's ``text`` file source; with ``file_source="autoloader"`` (Databricks)
    it is Auto Loader reading the same lines, keeping its file-discovery state in the checkpoint.
    """
    path = config.landing_dir(dataset)
    if config.file_source == "autoloader":
        reader = (
            spark.readStream.format("cloudFiles")
            .option("cloudFiles.format", "text")
            .option("cloudFiles.schemaLocation", config.schema_location(f"bronze_{dataset}"))
            .option("cloudFiles.includeExistingFiles", "true")
        )
        if config.max_files_per_trigger is not None:
            reader = reader.option(
                "cloudFiles.maxFilesPerTrigger", str(config.max_files_per_trigger)
            )
    else:
        reader = spark.readStream.format("text").option("maxFileAge", NO_FILE_AGE_LIMIT)
        if config.skip_missing_files:  # the loss is recorded (streams/missing_files.py)
            reader = reader.option("ignoreMissingFiles", "true")
        if config.max_files_per_trigger is not None:
            reader = reader.option("maxFilesPerTrigger", str(config.max_files_per_trigger))
        else:
            reader = reader.option("maxBytesPerTrigger", str(config.landing_max_bytes_per_trigger))
    lines = reader.option("lineSep", "\n").load(path)
    return lines.select(
        "value",
        F.col("_metadata.file_path").alias("_source_file"),
        F.current_timestamp().alias("_ingested_at"),
    )


def kafka_lines(
    spark: SparkSession, config: Config, dataset: str, security: dict[str, str] | None = None
) -> DataFrame:
    """A stream of the records of the dataset's Kafka topic (``config.kafka.topic(dataset)``).

    Columns: those of :func:`landing_lines` (``value`` is the record value decoded as UTF-8,
    ``_source_file`` the record's address ``kafka://<topic>/<partition>/<offset>``,
    ``_ingested_at`` the micro-batch time) plus ``_kafka_topic``, ``_kafka_partition``,
    ``_kafka_offset`` and ``_kafka_timestamp``. Keys and headers are not read.

    A new checkpoint starts at ``config.kafka.starting_offsets``; afterwards the offsets
    recorded in the checkpoint are the only position (nothing is committed to Kafka), so a
    replayed micro-batch reads exactly the same records. ``security`` defaults to the settings
    from the environment or the secret scope (:mod:`medallion.streams.kafka`).
    """
    if security is None:
        security = resolve_security_options(spark, config.kafka)
    reader = spark.readStream.format("kafka")
    for key, value in reader_options(config, dataset, security).items():
        reader = reader.option(key, value)
    records = reader.load()
    return records.select(
        F.col("value").cast("string").alias("value"),
        F.format_string("kafka://%s/%d/%d", "topic", "partition", "offset").alias("_source_file"),
        F.current_timestamp().alias("_ingested_at"),
        F.col("topic").alias("_kafka_topic"),
        F.col("partition").alias("_kafka_partition"),
        F.col("offset").alias("_kafka_offset"),
        F.col("timestamp").alias("_kafka_timestamp"),
    )


def input_lines(spark: SparkSession, config: Config, dataset: str) -> DataFrame:
    """The raw input of one dataset from the configured source: Kafka topic or landing files,
    without the lines of erased data subjects (medallion/erasure_log.py)."""
    if config.source == "kafka":
        lines = kafka_lines(spark, config, dataset)
    else:
        lines = landing_lines(spark, config, dataset)
    for pipeline in pipelines_of(config):
        if pipeline.subjects and dataset in pipeline.subjects.columns:
            fields = pipeline.subjects.column_names
            lines = without_erased(spark, config, dataset, fields, lines)  # erased stays erased
    return lines


# A new stream whose source has at most this many commits reads them from the first one
# instead of the source's snapshot, when that gives the same rows (:func:`replays_as_snapshot`).
FIRST_VERSION_READ_LIMIT = 20
# Actions of a commit after the first one that keep "every version read in turn" equal to "the
# latest snapshot read once": files added as new data, and what touches no row.
_ROW_NEUTRAL_ACTIONS = {"add", "commitInfo", "txn", "domainMetadata"}


def replays_as_snapshot(spark: SparkSession, table: TableRef) -> bool:
    """True when reading the table's commits from version 0 yields exactly the rows of its
    latest snapshot: its log still holds every commit (at most
    :data:`FIRST_VERSION_READ_LIMIT`, read as JSON without a Spark job), every file was added as
    new data, none was removed, and no commit after the first changed the schema or protocol.
    False whenever that cannot be told (a catalog table, a log cleaned up or not readable).
    """
    try:
        latest = committed_version(spark, table)
        if latest is None or latest >= FIRST_VERSION_READ_LIMIT:
            return False
        for version in range(latest + 1):
            actions = commit_actions(spark, table, version)
            allowed = _ROW_NEUTRAL_ACTIONS | ({"metaData", "protocol"} if version == 0 else set())
            if any(set(action) - allowed for action in actions):
                return False
            if any(not a["add"].get("dataChange", True) for a in actions if "add" in a):
                return False
    except LookupError:
        return False
    return True


def restart_version(
    spark: SparkSession, table: TableRef, checkpoint: str, change_feed: bool = False
) -> int | None:
    """A ``startingVersion`` that spares a restarted stream Delta's snapshot rebuild, or None.

    On a restart Spark hands each source the range of the stream's last committed batch again
    (``getBatch``), so that it can restore its state, and drops the rows. For a stream whose
    only batch is its first, that range has no start, and Delta builds it from the source's
    snapshot at the batch's last version: the table's state rebuilt and its files listed in
    order, with Spark jobs, for rows nobody reads. Delta reads a start of that range from
    ``startingVersion`` when one is set (it is ignored everywhere else once the checkpoint has a
    position), and from a version it reads the commits as JSON.

    So the version is given only for a stream whose first batch is committed and is the only
    one planned (a planned batch that is not committed is replayed, and its rows are read), when
    that batch read past the source's snapshot, the checkpoint holds exactly one position in
    this table, and the commit before the position is still in the log and reads as changes
    without a refusal: no change of schema or protocol, and no row removed unless the stream
    reads a change feed (a stream of rows refuses a commit that deletes some unless told to
    skip it).
    """
    if checkpoint_files.committed_batch(checkpoint) != 0:
        return None
    if checkpoint_files.planned_batch(checkpoint) != 0:
        return None
    identity = table_id(spark, table)
    try:
        offsets = checkpoint_files.source_offsets(checkpoint, 0)
    except OSError:
        return None
    positions = [o for o in offsets if o and identity and o.get("reservoirId") == identity]
    if len(positions) != 1 or positions[0].get("isStartingVersion", True):
        return None
    version = int(positions[0].get("reservoirVersion", 0)) - 1
    if version < 0:
        return None
    try:
        actions = commit_actions(spark, table, version)
    except LookupError:
        return None
    if any("metaData" in action or "protocol" in action for action in actions):
        return None
    removes = (a["remove"] for a in actions if "remove" in a)
    if not change_feed and any(remove.get("dataChange", True) for remove in removes):
        return None
    return version


def _starting_version(
    spark: SparkSession, table: TableRef, checkpoint: str, change_feed: bool
) -> int | None:
    """Where a stream given no starting point starts: version 0 for a new stream over a young
    source read as its commits (:func:`replays_as_snapshot`; a change feed always starts from
    its snapshot), or the version a restart after the first batch reads from
    (:func:`restart_version`); None leaves it to Delta."""
    if checkpoint_files.planned_batch(checkpoint) is None:
        return 0 if not change_feed and replays_as_snapshot(spark, table) else None
    return restart_version(spark, table, checkpoint, change_feed)


def delta_source_options(
    spark: SparkSession,
    table: TableRef,
    options: DeltaSourceOptions | None = None,
    change_feed: bool = False,
    checkpoint: str | None = None,
) -> dict[str, str]:
    """The reader options of a stream over ``table`` (see :func:`delta_stream`).

    Given the stream's ``checkpoint``, and no configured starting point, a new stream reads a
    young source from version 0 when that gives the same rows as its snapshot: Delta's initial
    snapshot costs a rebuild of the table's state and a sorted file listing (Spark jobs),
    reading a few commits costs none; and a stream restarted after its first batch skips the
    same rebuild (:func:`restart_version`). docs/delta-streaming.md, "Where a new stream starts
    when no starting point is set".
    """
    opts = (options or DeltaSourceOptions()).as_options()
    if change_feed:
        opts["readChangeFeed"] = "true"
        opts.pop("skipChangeCommits", None)  # a change feed reports changes; it never skips them
    if checkpoint is None or {"startingVersion", "startingTimestamp"} & set(opts):
        return opts
    start = _starting_version(spark, table, checkpoint, change_feed)
    if start is not None:
        opts["startingVersion"] = str(start)
    return opts


def delta_stream(
    spark: SparkSession,
    table: TableRef,
    options: DeltaSourceOptions | None = None,
    change_feed: bool = False,
    checkpoint: str | None = None,
) -> DataFrame:
    """A stream over a Delta table, with the configured Delta source options.

    With ``change_feed=True`` it reads the table's Change Data Feed instead of its rows. Given
    the stream's ``checkpoint``, a new stream may read a young source from its first commit
    instead of its snapshot, with the same rows, and a restart skips the snapshot Delta would
    rebuild for nothing (:func:`delta_source_options`).
    """
    reader = spark.readStream.format("delta")
    for key, value in delta_source_options(spark, table, options, change_feed, checkpoint).items():
        reader = reader.option(key, value)
    if table.path is not None:
        return reader.load(table.path)
    return reader.table(table.qualified_name)
