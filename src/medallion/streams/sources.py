"""Stream sources: landing files (file source or Auto Loader), Kafka topics and Delta tables."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.config import Config, DeltaSourceOptions, TableRef
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
        security = resolve_security_options(spark, config)
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
    """The raw input of one dataset from the configured source: Kafka topic or landing files."""
    if config.source == "kafka":
        return kafka_lines(spark, config, dataset)
    return landing_lines(spark, config, dataset)


def delta_stream(
    spark: SparkSession,
    table: TableRef,
    options: DeltaSourceOptions | None = None,
    change_feed: bool = False,
) -> DataFrame:
    """A stream over a Delta table, with the configured Delta source options.

    With ``change_feed=True`` it reads the table's Change Data Feed instead of its rows.
    """
    reader = spark.readStream.format("delta")
    opts = (options or DeltaSourceOptions()).as_options()
    if change_feed:
        reader = reader.option("readChangeFeed", "true")
        opts.pop("skipChangeCommits", None)  # a change feed reports changes; it never skips them
    for key, value in opts.items():
        reader = reader.option(key, value)
    if table.path is not None:
        return reader.load(table.path)
    return reader.table(table.qualified_name)
