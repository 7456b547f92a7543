"""The parameters of a job task or a notebook, as text (job parameters, widgets, notebook
variables), and the :class:`~medallion.config.Config` they describe.

:meth:`TaskParams.config` turns them into the one Config that decides names and paths: with
``catalog`` set, tables are Unity Catalog names and files live in Volumes; without it, tables
are paths under ``lake``.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields

from medallion.bundle.resolve import Bundle, BundleError
from medallion.config import Config, parse_pairs, parse_settings
from medallion.deployment import checked
from medallion.errors import ConfigError
from medallion.pipelines import all_datasets
from medallion.run_options import parameter_default
from medallion.session import session_kind
from medallion.source_options import KafkaSourceOptions

TRIGGERS = ("available_now", "processing_time")
FILE_SOURCES = ("auto", "files", "autoloader")
SOURCES = ("files", "kafka")
VOLUMES_PREFIX = "/Volumes/"
TOPIC_SUFFIX = "_topic"


@dataclass(frozen=True)
class TaskParams:
    """The parameters of a pipeline task, as text (job parameters, widgets, notebook variables).

    >>> TaskParams(landing="/tmp/landing", lake="/tmp/lake", flows="silver_events").flow_names
    ('silver_events',)
    """

    # Each parameter is a run option (medallion/run_options.py): its meaning and default there.
    catalog: str = parameter_default("catalog")
    schema: str = parameter_default("schema")
    landing: str = parameter_default("landing")
    lake: str = parameter_default("lake")
    checkpoint_root: str = parameter_default("checkpoint_root")
    file_source: str = parameter_default("file_source")
    trigger: str = parameter_default("trigger")
    interval_seconds: str = parameter_default("interval_seconds")
    max_files_per_trigger: str = parameter_default("max_files_per_trigger")
    pipeline: str = parameter_default("pipeline")
    settings: str = parameter_default("settings")
    flows: str = parameter_default("flows")
    # The Kafka credentials are never parameters: they are read from the secret scope
    # ``kafka_secret_scope`` names (on Databricks), else from MEDALLION_KAFKA_* variables.
    source: str = parameter_default("source")
    kafka_bootstrap: str = parameter_default("kafka_bootstrap")
    # A parameter ``<dataset>_topic`` (events_topic=...) joins ``topics`` (from_mapping).
    topics: str = parameter_default("topics")
    starting_offsets: str = parameter_default("starting_offsets")
    max_offsets_per_trigger: str = parameter_default("max_offsets_per_trigger")
    kafka_secret_scope: str = parameter_default("kafka_secret_scope")
    kafka_fail_on_data_loss: str = parameter_default("kafka_fail_on_data_loss")
    readers: str = parameter_default("readers")

    def __post_init__(self) -> None:
        if self.trigger not in TRIGGERS:
            raise ConfigError(f"unknown trigger {self.trigger!r}: use {' or '.join(TRIGGERS)}")
        if self.source not in SOURCES:
            raise ConfigError(f"unknown source {self.source!r}: use {' or '.join(SOURCES)}")
        if self.file_source not in FILE_SOURCES:
            raise ConfigError(
                f"unknown file source {self.file_source!r}: use {', '.join(FILE_SOURCES)}"
            )

    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> TaskParams:
        """The parameters among ``values``, as text: each ``<dataset>_topic`` joins ``topics``,
        other keys are ignored.

        >>> TaskParams.from_mapping({"lake": "/l", "events_topic": "shop.clicks"}).topics
        'events=shop.clicks'
        """
        names = {f.name for f in fields(cls)}
        text = {k: "" if v is None else str(v) for k, v in values.items()}
        params = {k: v for k, v in text.items() if k in names}
        listed = parse_pairs(params.get("topics", ""), "topic")
        for key, value in text.items():
            dataset, topic = key.removesuffix(TOPIC_SUFFIX), value.strip()
            if key in names or not key.endswith(TOPIC_SUFFIX) or topic in ("", dataset):
                continue  # not a topic, or the dataset's own name: the default
            if listed.setdefault(dataset, topic) != topic:
                raise ConfigError(
                    f"the {dataset} topic is given twice: {key}={topic} and "
                    f"topics={dataset}={listed[dataset]}"
                )
        params["topics"] = ",".join(f"{dataset}={topic}" for dataset, topic in listed.items())
        return cls(**params)

    @property
    def stream(self) -> bool:
        """True when the flows keep running with processing-time triggers."""
        return self.trigger == "processing_time"

    @property
    def flow_names(self) -> tuple[str, ...]:
        """The flows named by ``flows`` (comma-separated), in order."""
        return tuple(name.strip() for name in self.flows.split(",") if name.strip())

    def config(self) -> Config:
        """The Config these parameters describe; relative local paths are made absolute."""
        try:
            interval = float(self.interval_seconds)
            max_files = int(self.max_files_per_trigger) if self.max_files_per_trigger else None
            max_offsets = (
                int(self.max_offsets_per_trigger) if self.max_offsets_per_trigger else None
            )
        except ValueError as error:
            raise ConfigError(f"invalid number in the task parameters: {error}") from None
        fail_on_data_loss = true_or_false(
            "kafka_fail_on_data_loss", self.kafka_fail_on_data_loss, default=True
        )
        config = Config(
            pipelines=tuple(p.strip() for p in self.pipeline.split(",") if p.strip()),
            settings=parse_settings(self.settings),
            # The Kafka source reads no landing files; its Config still names a folder.
            landing=_absolute(self.landing or (self.lake if self.source == "kafka" else "")),
            lake=_absolute(self.lake),
            catalog=self.catalog or None,
            schema=self.schema,
            readers=self.readers.strip() or None,
            checkpoint_root=_absolute(self.checkpoint_root) or None,
            file_source=resolve_file_source(self.file_source),
            max_files_per_trigger=max_files,
            trigger_interval_seconds=interval,
            source=self.source,  # type: ignore[arg-type]  # checked in __post_init__
            kafka=KafkaSourceOptions(
                bootstrap_servers=self.kafka_bootstrap or None,
                topics=parse_pairs(self.topics, "topic"),
                starting_offsets=self.starting_offsets,
                max_offsets_per_trigger=max_offsets,
                secret_scope=self.kafka_secret_scope or None,
                fail_on_data_loss=fail_on_data_loss,
            ),
        )
        return checked(config)  # settings and carried columns against the declarations


def _absolute(path: str) -> str:
    """A local relative path made absolute; URIs and absolute paths are kept as they are."""
    if not path or "://" in path or path.startswith("/"):
        return path
    return os.path.abspath(path)


def resolve_file_source(choice: str = "auto") -> str:
    """The file source to read landing files with; the one place that choice is made.

    ``auto`` picks Auto Loader (``cloudFiles``) on Databricks, its runtime or Databricks Connect,
    and Spark's open-source file source everywhere else. Both read the same lines under the
    same contract (medallion/streams/sources.py).
    """
    if choice != "auto":
        return choice

    return "autoloader" if session_kind() in ("databricks", "databricks-connect") else "files"


def true_or_false(name: str, text: str, default: bool | None = None) -> bool:
    """A parameter's ``true`` or ``false`` (any case); an empty one is ``default``, or an error
    when there is none.

    >>> true_or_false("dry_run", " TRUE "), true_or_false("x", "", default=True)
    (True, True)
    """
    value = text.strip().lower()
    if not value and default is not None:
        return default
    if value not in ("true", "false"):
        raise ConfigError(f"{name} must be true or false, not {text!r}")
    return value == "true"


def notebook_params(namespace: Mapping[str, object]) -> TaskParams:
    """A notebook's :class:`TaskParams`: every parameter, and the topic of every declared
    dataset (``<dataset>_topic``), from a widget, else a variable.

    ``namespace`` is the notebook's ``globals()``. Its variables named like parameters are the
    local defaults (a job run outside Databricks injects its values into them); a parameter
    without one defaults as :class:`TaskParams` does. On Databricks, where ``dbutils`` exists,
    each parameter is a text widget with that default, and the widget's value (the job's or
    the task's parameter, when a job runs the notebook) wins. So every notebook takes every
    parameter, and its parameters cell only holds what differs on a laptop.
    """
    names = [f.name for f in fields(TaskParams)]
    names += [f"{dataset}{TOPIC_SUFFIX}" for dataset in all_datasets()]
    defaults = {name: namespace.get(name, _default(name)) for name in names}
    dbutils = namespace.get("dbutils")
    if dbutils is not None:  # on Databricks: the laptop's paths mean nothing there
        defaults.update(workspace_defaults(dbutils))
    return TaskParams.from_mapping(widget_values(defaults, names, dbutils))


# The parameters whose defaults differ between a laptop and a workspace.
PLACES = ("catalog", "schema", "landing", "lake", "checkpoint_root", "file_source")
# The target whose values a notebook opened by hand on Databricks starts from: a developer's
# own schema and volumes, so a notebook run by hand never writes production tables.
HAND_RUN_TARGET = "dev"


def workspace_defaults(dbutils: object) -> dict[str, str]:
    """The dev target's catalog, schema, volumes and file source for the user running the
    notebook, read from the deployed bundle (``databricks.yml`` above the notebook); empty when
    no bundle is found."""
    try:
        resolve = Bundle().resolver(HAND_RUN_TARGET, user_name=_user_name(dbutils))
        return {name: str(resolve(f"${{var.{name}}}", name)) for name in PLACES}
    except (BundleError, OSError, ValueError):
        return {}


def _user_name(dbutils: object) -> str:
    """The workspace user running the notebook."""
    try:
        context = dbutils.notebook.entry_point.getDbutils().notebook().getContext()  # type: ignore[attr-defined]
        return str(context.userName().get())
    except Exception:  # noqa: BLE001 - not on Databricks, or a context without a user
        return getpass.getuser()


def _default(name: str) -> object:
    """A parameter's default: a field's, or for ``<dataset>_topic`` the dataset's name."""
    declared = {f.name: f.default for f in fields(TaskParams)}
    return declared.get(name, name.removesuffix(TOPIC_SUFFIX))


def widget_values(
    namespace: Mapping[str, object], names: Sequence[str], dbutils: object | None = None
) -> dict[str, str]:
    """The values of the named notebook parameters: widgets with ``dbutils`` (by default the
    namespace's), else the namespace's variables."""
    values = {name: str(namespace[name]) for name in names if name in namespace}
    dbutils = namespace.get("dbutils") if dbutils is None else dbutils
    if dbutils is not None:
        for name, default in values.items():
            dbutils.widgets.text(name, default)  # type: ignore[attr-defined]
            values[name] = dbutils.widgets.get(name)  # type: ignore[attr-defined]
    return values
