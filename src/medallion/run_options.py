"""Every option of a run, defined once: what it means, and where a run takes it.

A run is told where things live and how its streams run in three places: ``medallion run``'s
flags, a job task's or notebook's parameters (:class:`~medallion.task_params.TaskParams`), and
the bundle variables that give a pipeline job its parameters (``pipeline_job_parameters`` in
``databricks.yml``). Each :class:`RunOption` says which of them take it. The flags' help and
TaskParams' defaults come from here, and tests/unit/test_run_options.py holds the flags, the
TaskParams fields and the bundle's job parameters to this list, so none can gain an option, or
lose one, alone.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunOption:
    """One option of a run.

    ``name`` is its task parameter (a job parameter, a notebook widget) when ``parameter``,
    else its name in the CLI's arguments. ``flag`` is its ``medallion run`` flag, if it has
    one; ``variable`` the bundle variable that gives a pipeline job's parameter its value, if
    the bundle sets it for every pipeline job (the others, such as ``pipeline`` and
    ``trigger``, each job sets in its tasks: medallion/pipeline_jobs.py). ``default`` is the
    task parameter's, as text.
    """

    name: str
    help: str
    default: str = ""
    flag: str | None = None
    parameter: bool = True
    variable: str | None = None


RUN_OPTIONS: tuple[RunOption, ...] = (
    # Where things live.
    RunOption(
        "catalog",
        "Unity Catalog catalog of the tables; empty: path tables under the lake",
        variable="catalog",
    ),
    RunOption("schema", "schema of the tables", "medallion", variable="schema"),
    RunOption("landing", "folder where input files land", flag="--landing", variable="landing"),
    RunOption("lake", "folder of the Delta tables and checkpoints", flag="--lake", variable="lake"),
    RunOption(
        "checkpoint_root",
        "folder of the streams' checkpoints (default: <lake>/_checkpoints)",
        variable="checkpoint_root",
    ),
    RunOption(
        "file_source",
        "how landing files are read: autoloader, files, or auto (Auto Loader on Databricks)",
        "auto",
        variable="file_source",
    ),
    RunOption(
        "readers",
        "the group granted SELECT on the gold tables (Unity Catalog); empty: none",
        variable="readers_group",
    ),
    # What runs.
    RunOption(
        "pipeline",
        "the pipelines run, comma-separated; empty: every one with input",
        flag="--pipeline",
    ),
    RunOption(
        "settings",
        "pipeline settings, NAME=VALUE (`medallion pipelines` lists them)",
        flag="--set",
    ),
    RunOption("flows", "the flows a task runs, comma-separated; empty: its layer's"),
    RunOption(
        "carried_columns",
        "input fields carried into a table as STRING columns, [TABLE:]NAME",
        flag="--carry-column",
        parameter=False,
    ),
    # How the streams run.
    RunOption(
        "trigger",
        "available_now (process what has landed, then stop) or processing_time (keep running)",
        "available_now",
        flag="--stream",
    ),
    RunOption(
        "interval_seconds",
        "while streaming: seconds between looks for new input while idle (a stream with input "
        "runs its batches back to back)",
        "10",
        flag="--interval",
        variable="trigger_interval_seconds",
    ),
    RunOption(
        "max_files_per_trigger",
        "landing files per micro-batch (default: about 384 MiB of files a batch)",
        flag="--max-files-per-trigger",
        variable="max_files_per_trigger",
    ),
    RunOption(
        "skip_missing_files",
        "accept the loss of landed files deleted after they were listed: read the rest and "
        "record each one in <lake>/_system/data_gaps",
        flag="--skip-missing-files",
        parameter=False,
    ),
    # Kafka (docs/kafka.md).
    RunOption(
        "source", "bronze's input: files or kafka", "files", flag="--source", variable="source"
    ),
    RunOption(
        "kafka_bootstrap",
        "Kafka bootstrap servers, HOST:PORT[,...]",
        flag="--kafka-bootstrap",
        variable="kafka_bootstrap",
    ),
    RunOption(
        "topics",
        "the topics of datasets not read from the topic of their own name, DATASET=TOPIC",
        flag="--<dataset>-topic",
        variable="kafka_topics",
    ),
    RunOption(
        "starting_offsets",
        "where a new checkpoint starts: earliest, latest or JSON",
        "earliest",
        flag="--starting-offsets",
        variable="starting_offsets",
    ),
    RunOption(
        "max_offsets_per_trigger",
        "records per micro-batch (default: 1,000,000)",
        flag="--max-offsets-per-trigger",
        variable="max_offsets_per_trigger",
    ),
    RunOption(
        "kafka_secret_scope",
        "Databricks secret scope of the credentials",
        flag="--kafka-secret-scope",
        variable="kafka_secret_scope",
    ),
    RunOption(
        "kafka_fail_on_data_loss",
        "when records not read yet are gone (retention, a recreated topic), false reads what "
        "remains instead of stopping, and records the lost offsets in <lake>/_system/data_gaps",
        "true",
        flag="--kafka-accept-data-loss",
        variable="kafka_fail_on_data_loss",
    ),
    # The Delta source of every Delta-to-Delta stream (docs/delta-streaming.md): the CLI's.
    RunOption(
        "starting_version",
        "where a new checkpoint starts reading its source table (no initial snapshot)",
        flag="--starting-version",
        parameter=False,
    ),
    RunOption(
        "starting_timestamp",
        "start a new checkpoint at the first commit at or after this time (ISO-8601)",
        flag="--starting-timestamp",
        parameter=False,
    ),
    RunOption(
        "delta_max_files_per_trigger",
        "source files per micro-batch (Delta's default: 1000)",
        flag="--delta-max-files-per-trigger",
        parameter=False,
    ),
    RunOption(
        "delta_max_bytes_per_trigger",
        "soft limit of source bytes per micro-batch, for example 512m",
        flag="--delta-max-bytes-per-trigger",
        parameter=False,
    ),
    RunOption(
        "skip_change_commits",
        "fail on an UPDATE, DELETE or MERGE upstream instead of skipping its commit",
        flag="--no-skip-change-commits",
        parameter=False,
    ),
    RunOption(
        "with_event_time_order",
        "read the initial snapshot in event-time order (Databricks Runtime only)",
        flag="--with-event-time-order",
        parameter=False,
    ),
)

_BY_NAME = {option.name: option for option in RUN_OPTIONS}
_BY_FLAG = {option.flag: option for option in RUN_OPTIONS if option.flag}


def run_option(name: str) -> RunOption:
    """The option ``name``.

    >>> run_option("interval_seconds").flag
    '--interval'
    """
    return _BY_NAME[name]


def flag_help(flag: str) -> str:
    """The help of the option ``medallion run`` takes as ``flag``.

    >>> flag_help("--source")
    "bronze's input: files or kafka"
    """
    return _BY_FLAG[flag].help


def parameter_default(name: str) -> str:
    """The default of the task parameter ``name``, as text."""
    option = _BY_NAME[name]
    if not option.parameter:
        raise KeyError(f"{name} is not a task parameter")
    return option.default
