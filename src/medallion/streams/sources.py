"""Stream sources: landing files (open-source file source or Auto Loader) and Delta tables."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.config import Config, DeltaSourceOptions, TableRef


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
            reader = reader.option("cloudFiles.maxFilesPerTrigger", str(config.max_files_per_trigger))
    else:
        reader = spark.readStream.format("text")
        if config.max_files_per_trigger is not None:
            reader = reader.option("maxFilesPerTrigger", str(config.max_files_per_trigger))
    lines = reader.option("lineSep", "\n").load(path)
    return lines.select(
        "value",
        F.col("_metadata.file_path").alias("_source_file"),
        F.current_timestamp().alias("_ingested_at"),
    )


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
