"""One configuration object: where every table and checkpoint lives, and how streams run.

Locally tables are path-based Delta tables under ``<lake>/<layer>/<table>`` and are also
registered by name (``medallion.bronze_events``) in the session catalog. On Databricks the
same tables are Unity Catalog names (``<catalog>.<schema>.bronze_events``) and checkpoints
live under a Volume. Changing where a table lives touches this module only.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from medallion.declarations import Flow, Pipeline, Setting, Table

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")

FileSourceKind = Literal["files", "autoloader"]
SourceKind = Literal["files", "kafka"]

# Kafka's legal topic names: ASCII letters, digits, '.', '_' and '-', at most 249 characters.
_KAFKA_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_KAFKA_BOOTSTRAP = re.compile(r"[A-Za-z0-9._\[\]:-]+:[0-9]{1,5}(,[A-Za-z0-9._\[\]:-]+:[0-9]{1,5})*")


class ConfigError(ValueError):
    """A configuration value is unusable; the message says which and why."""


def validate_identifier(value: str, what: str = "identifier") -> str:
    """Return ``value`` if it is a plain SQL identifier, else raise :class:`ConfigError`.

    Only ``[A-Za-z_][A-Za-z0-9_]*`` is accepted, so quotes, backticks, semicolons, dots and
    whitespace can never reach SQL text.

    >>> validate_identifier("silver_events")
    'silver_events'
    """
    if not isinstance(value, str) or not _IDENTIFIER.fullmatch(value):
        raise ConfigError(
            f"invalid {what} {value!r}: use letters, digits and underscores, not starting with a digit"
        )
    return value


def quote_identifier(*parts: str) -> str:
    """Validate each part and join them as a backtick-quoted, dot-separated SQL name."""
    return ".".join(f"`{validate_identifier(p)}`" for p in parts)


def quote_principal(name: str) -> str:
    """A Unity Catalog principal (a group, a user's e-mail, an application id) as a
    backtick-quoted SQL name; a name with a backtick or a control character is refused.

    >>> quote_principal("medallion-readers")
    '`medallion-readers`'
    """
    if not name.strip() or "`" in name or _CONTROL.search(name):
        raise ConfigError(f"invalid principal {name!r}: no backticks or control characters")
    return f"`{name}`"


def sql_string(value: str) -> str:
    """``value`` as a Spark SQL string literal: quoted, backslashes and quotes escaped.

    >>> print(sql_string("/lake/it's\\here"))
    '/lake/it\\'s\\\\here'
    """
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def quote_path(path: str) -> str:
    """``path`` as a backtick-quoted SQL identifier (``delta.`<path>```): backticks doubled."""
    return "`" + path.replace("`", "``") + "`"


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def normalize_path(path: str) -> str:
    """A path without ``.``/``..`` segments or a trailing slash; URIs (``s3://``) keep their scheme."""
    scheme, sep, rest = path.partition("://")
    if not sep:
        scheme, rest = "", path
    normalized = posixpath.normpath(rest) if rest else rest
    if normalized.startswith("//"):  # normpath keeps a leading double slash; one is enough
        normalized = "/" + normalized.lstrip("/")
    return f"{scheme}{sep}{normalized}" if sep else normalized


def path_under(root: str, relative: str) -> str:
    """``root/relative``, refusing any ``relative`` that would leave ``root``."""
    candidate = normalize_path(f"{root}/{relative}")
    if posixpath.isabs(relative) or not (candidate + "/").startswith(root.rstrip("/") + "/"):
        raise ConfigError(f"path {relative!r} escapes its root {root!r}")
    return candidate


def flat_table_name(layer: str, name: str) -> str:
    """A table's name in a schema: ``<layer>_<name>`` (``_system`` tables: ``system_<name>``).

    >>> flat_table_name("_system", "stream_progress")
    'system_stream_progress'
    """
    return validate_identifier(f"{layer.lstrip('_')}_{name}", "table")


@dataclass(frozen=True)
class TableRef:
    """Where one table lives: a path (local) and/or a catalog name (always)."""

    layer: str
    name: str
    path: str | None
    qualified_name: str

    @property
    def key(self) -> str:
        """The table's key in the contract, for example ``silver/events``."""
        return f"{self.layer}/{self.name}"

    @property
    def flat_name(self) -> str:
        """The table's name in its schema, for example ``silver_events``."""
        return flat_table_name(self.layer, self.name)

    @property
    def sql_name(self) -> str:
        """A SQL reference to the table: ``delta.`path``` locally, the catalog name otherwise."""
        if self.path is not None:
            return f"delta.{quote_path(self.path)}"
        return self.qualified_name


@dataclass(frozen=True)
class DeltaSourceOptions:
    """Options of every Delta-to-Delta stream (see the Delta streaming documentation)."""

    starting_version: int | str | None = None
    starting_timestamp: str | None = None
    max_files_per_trigger: int | None = None
    max_bytes_per_trigger: str | None = None
    # MERGE and maintenance rewrite files upstream; skipping those commits keeps readers alive.
    skip_change_commits: bool = True
    with_event_time_order: bool = False

    def as_options(self) -> dict[str, str]:
        """The non-default options as ``DataStreamReader.option`` pairs."""
        if self.starting_version is not None and self.starting_timestamp is not None:
            raise ConfigError("set startingVersion or startingTimestamp, not both")
        options: dict[str, str] = {}
        if self.starting_version is not None:
            options["startingVersion"] = str(self.starting_version)
        if self.starting_timestamp is not None:
            options["startingTimestamp"] = self.starting_timestamp
        if self.max_files_per_trigger is not None:
            options["maxFilesPerTrigger"] = str(self.max_files_per_trigger)
        if self.max_bytes_per_trigger is not None:
            options["maxBytesPerTrigger"] = str(self.max_bytes_per_trigger)
        if self.skip_change_commits:
            options["skipChangeCommits"] = "true"
        if self.with_event_time_order:
            options["withEventTimeOrder"] = "true"
        return options


# Every source reads a bounded amount per micro-batch unless told otherwise, so a first run over
# a huge backlog takes several batches that fit the default 1 GiB driver (384 MiB of lines is
# about 2.3M events; a batch of 2M used all of it and finished), instead of one batch
# that runs out of memory and, replaying the same recorded offsets, runs out again on every
# restart. Delta sources and Auto Loader already stop at 1,000 files a batch by default.
DEFAULT_LANDING_MAX_BYTES_PER_TRIGGER = 384 << 20  # the file source takes plain bytes
DEFAULT_KAFKA_MAX_OFFSETS_PER_TRIGGER = 1_000_000


@dataclass(frozen=True)
class KafkaSourceOptions:
    """Where and how the Kafka source reads (``source="kafka"``); see docs/kafka.md.

    Each input dataset is read from the topic of its own name unless ``topics`` maps it to
    another. Credentials never live here: they come from ``MEDALLION_KAFKA_*`` environment
    variables, or from the Databricks secret scope named by ``secret_scope``
    (medallion/streams/kafka.py).

    >>> options = KafkaSourceOptions(topics={"events": "shop.clicks"})
    >>> options.topic("events"), options.topic("customers")
    ('shop.clicks', 'customers')
    """

    bootstrap_servers: str | None = None
    # The topic of each dataset whose topic is not named like the dataset.
    topics: Mapping[str, str] = field(default_factory=dict)
    # Where a new checkpoint starts: earliest, latest or Spark's JSON {"topic": {"0": 42}}.
    # An existing checkpoint always resumes from the offsets it recorded.
    starting_offsets: str = "earliest"
    # Records per micro-batch (all partitions together); None means the default bound.
    max_offsets_per_trigger: int | None = None
    secret_scope: str | None = None
    # Stop when records the stream has not read yet are gone (expired by retention, deleted,
    # or the topic recreated): Spark's failOnDataLoss. False (--kafka-accept-data-loss) reads
    # what remains and records each lost range in <lake>/_system/data_gaps (docs/kafka.md).
    fail_on_data_loss: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.fail_on_data_loss, bool):
            raise ConfigError(
                f"fail_on_data_loss must be true or false, not {self.fail_on_data_loss!r}"
            )
        servers = self.bootstrap_servers
        if servers is not None and not _KAFKA_BOOTSTRAP.fullmatch(servers):
            raise ConfigError(
                f"invalid Kafka bootstrap servers {servers!r}: use HOST:PORT[,HOST:PORT...]"
            )
        for dataset in self.topics:
            validate_identifier(dataset, "dataset")
            topic = self.topics[dataset]
            legal = isinstance(topic, str) and _KAFKA_TOPIC.fullmatch(topic)
            if not legal or topic in (".", ".."):
                raise ConfigError(
                    f"invalid {dataset} topic {topic!r}: use letters, digits, '.', '_' and '-' "
                    "(at most 249)"
                )
        offsets = self.starting_offsets
        if offsets not in ("earliest", "latest") and not str(offsets).lstrip().startswith("{"):
            raise ConfigError(
                f"invalid starting offsets {offsets!r}: use earliest, latest or JSON such as "
                '{"events": {"0": 42}}'
            )
        if self.max_offsets_per_trigger is not None and self.max_offsets_per_trigger <= 0:
            raise ConfigError("maxOffsetsPerTrigger must be positive")
        if self.secret_scope is not None and not self.secret_scope.strip():
            raise ConfigError("the Kafka secret scope must not be empty")

    def topic(self, dataset: str) -> str:
        """The topic the input records of ``dataset`` are read from."""
        return self.topics.get(dataset) or validate_identifier(dataset, "dataset")


def parse_pairs(pairs: str | Sequence[str], what: str = "setting") -> dict[str, str]:
    """``NAME=VALUE`` pairs, as a list or comma-separated (a job parameter); each name an
    identifier.

    >>> parse_pairs("fraud_risk_score_above=0.9, fraud_new_account_days=14")
    {'fraud_risk_score_above': '0.9', 'fraud_new_account_days': '14'}
    """
    items = pairs.split(",") if isinstance(pairs, str) else pairs
    parsed: dict[str, str] = {}
    for item in (i.strip() for i in items):
        if not item:
            continue
        name, equals, value = item.partition("=")
        if not equals or not value.strip():
            raise ConfigError(f"a {what} is written NAME=VALUE, not {item!r}")
        parsed[validate_identifier(name.strip(), f"{what} name")] = value.strip()
    return parsed


def parse_settings(pairs: str | Sequence[str]) -> dict[str, str]:
    """Pipeline settings written ``NAME=VALUE`` (``--set``, the ``settings`` job parameter)."""
    return parse_pairs(pairs, "setting")


@dataclass(frozen=True)
class Config:
    """Names, paths, sources and triggers for one deployment of the pipeline.

    >>> cfg = Config(landing="/tmp/landing", lake="/tmp/lake")
    >>> cfg.table("silver/events").path
    '/tmp/lake/silver/events'
    >>> cfg.checkpoint("silver_events")
    '/tmp/lake/_checkpoints/silver_events'
    """

    landing: str
    lake: str
    catalog: str | None = None
    schema: str = "medallion"
    checkpoint_root: str | None = None
    file_source: FileSourceKind = "files"
    # Where bronze reads from: landing files, or Kafka topics (``kafka`` holds the options).
    source: SourceKind = "files"
    kafka: KafkaSourceOptions = field(default_factory=KafkaSourceOptions)
    # Landing files per micro-batch; without it, batches stop at about
    # ``landing_max_bytes_per_trigger`` (Spark takes one bound or the other, not both).
    max_files_per_trigger: int | None = None
    landing_max_bytes_per_trigger: int = DEFAULT_LANDING_MAX_BYTES_PER_TRIGGER
    # Accept the loss of landed files deleted after a stream listed them, before it read them:
    # read the rest and record each in <lake>/_system/data_gaps (streams/missing_files.py).
    skip_missing_files: bool = False
    delta_source: DeltaSourceOptions = field(default_factory=DeltaSourceOptions)
    # Per-stream overrides of ``delta_source``, keyed by stream (query) name.
    delta_source_overrides: dict[str, DeltaSourceOptions] = field(default_factory=dict)
    # How often a streaming run's queries look for new input while they are idle; a query
    # with input runs its batches back to back.
    trigger_interval_seconds: float = 0.5
    # How long, in all, to wait for in-flight batches when a streaming run is asked to stop.
    stop_timeout_seconds: float = 60.0
    # How often a streaming run checks its tables for small files to compact (compaction.py).
    compaction_check_seconds: float = 60.0
    # The longest a stream may be stopped or lag behind its source; VACUUM retention must be
    # longer, so files a resuming stream still has to read are never deleted (ops/maintain.py).
    max_stream_downtime_hours: float = 72.0
    # Input fields the contract does not name, carried into a table as STRING columns (opt-in
    # schema evolution, docs/operations.md), by table key: {"silver/events": ("coupon",)}.
    # Only a table declared with ``carries_input_fields`` takes them.
    carried_columns: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # The pipelines this deployment covers (medallion/pipelines); empty: every registered one.
    pipelines: tuple[str, ...] = ()
    # Values of the pipelines' settings (declarations.Setting), by name, as text.
    settings: Mapping[str, str] = field(default_factory=dict)
    # The group (a Unity Catalog principal) granted SELECT on every gold table by the run that
    # creates the tables: the readers of the dashboards. None: no grant.
    readers: str | None = None

    def __post_init__(self) -> None:
        if self.catalog is not None:
            validate_identifier(self.catalog, "catalog")
        if self.readers is not None:
            quote_principal(self.readers)
        validate_identifier(self.schema, "schema")
        for key in ("landing", "lake", "checkpoint_root"):
            value = getattr(self, key)
            if key == "checkpoint_root" and value is None:
                continue
            if not value or not isinstance(value, str):
                raise ConfigError(f"{key} must be a non-empty path")
            if _CONTROL.search(value):
                raise ConfigError(f"{key} {value!r} holds a control character")
        object.__setattr__(self, "landing", normalize_path(self.landing))
        object.__setattr__(self, "lake", normalize_path(self.lake))
        if self.landing_max_bytes_per_trigger <= 0:
            raise ConfigError("the landing bytes per micro-batch must be positive")
        if self.trigger_interval_seconds <= 0:
            raise ConfigError("the trigger interval must be positive")
        if self.source not in ("files", "kafka"):
            raise ConfigError(f"unknown source {self.source!r}: use files or kafka")
        if self.source == "kafka" and not self.kafka.bootstrap_servers:
            raise ConfigError("the Kafka source needs bootstrap servers (--kafka-bootstrap)")
        if not self.max_stream_downtime_hours > 0:
            raise ConfigError("the maximum stream downtime must be positive (hours)")
        object.__setattr__(
            self,
            "carried_columns",
            {key: self._carried(key, names) for key, names in self.carried_columns.items()},
        )
        names = (self.pipelines,) if isinstance(self.pipelines, str) else self.pipelines
        names = tuple(validate_identifier(n, "pipeline name") for n in names)
        object.__setattr__(self, "pipelines", tuple(dict.fromkeys(names)))
        for name, value in self.settings.items():
            self._declared_setting(name).parse(value)

    def _carried(self, key: str, names: Sequence[str] | str) -> tuple[str, ...]:
        """Validate the fields carried into ``key``: identifiers, none twice, none a column
        the table declares or a metadata column."""
        table = self._declared_table(key)
        if not table.carries_input_fields:
            raise ConfigError(f"table {key} takes no carried columns")
        names = (names,) if isinstance(names, str) else tuple(names)
        declared = {c.lower() for c in table.columns}
        seen: set[str] = set()
        for name in names:
            lowered = validate_identifier(name, "carried column").lower()  # as Spark resolves
            if lowered in seen:
                raise ConfigError(f"carried column {name!r} is given twice")
            if lowered in declared or lowered.startswith("_"):
                raise ConfigError(f"carried column {name!r} is a column of {key} already")
            seen.add(lowered)
        return names

    def carried(self, key: str) -> tuple[str, ...]:
        """The input fields carried into the table ``key`` (empty unless some are asked for)."""
        return self.carried_columns.get(key, ())

    def _declared_table(self, key: str) -> Table:
        from medallion.pipelines import declared_table

        try:
            return declared_table(key)
        except KeyError as error:
            raise ConfigError(str(error.args[0])) from None

    def _declared_setting(self, name: str) -> Setting:
        from medallion.pipelines import declared_setting

        try:
            return declared_setting(name)
        except KeyError as error:
            raise ConfigError(str(error.args[0])) from None

    def setting(self, name: str) -> Decimal:
        """The value of a pipeline's setting: the one given, else its declared default."""
        declared = self._declared_setting(name)
        given = self.settings.get(name)
        return declared.default if given is None else declared.parse(given)

    @property
    def uses_unity_catalog(self) -> bool:
        """True when tables are Unity Catalog names rather than paths."""
        return self.catalog is not None

    def with_options(self, **changes: object) -> Config:
        """A copy with some fields changed."""
        return replace(self, **changes)

    def source_options(self, stream_name: str) -> DeltaSourceOptions:
        """The Delta source options of one Delta-to-Delta stream."""
        return self.delta_source_overrides.get(stream_name, self.delta_source)

    def table(self, key: str) -> TableRef:
        """The :class:`TableRef` of a declared table, for example ``table("silver/events")``."""
        declared = self._declared_table(key)
        layer, name = declared.layer, declared.name
        flat_name = flat_table_name(layer, name)
        if self.uses_unity_catalog:
            assert self.catalog is not None
            return TableRef(
                layer, name, None, quote_identifier(self.catalog, self.schema, flat_name)
            )
        return TableRef(
            layer, name, f"{self.lake}/{layer}/{name}", quote_identifier(self.schema, flat_name)
        )

    def system_table(self, name: str) -> TableRef:
        """A table of medallion's own bookkeeping, ``<lake>/_system/<name>`` (Unity Catalog:
        ``<catalog>.<schema>.system_<name>``), for example ``stream_progress``."""
        flat_name = flat_table_name("_system", name)
        if self.uses_unity_catalog:
            assert self.catalog is not None
            return TableRef(
                "_system", name, None, quote_identifier(self.catalog, self.schema, flat_name)
            )
        return TableRef(
            "_system",
            name,
            f"{self.lake}/_system/{validate_identifier(name, 'table')}",
            quote_identifier(self.schema, flat_name),
        )

    def declared_pipelines(self) -> list[Pipeline]:
        """The pipelines this Config covers; :class:`ConfigError` for an unknown name."""
        from medallion.pipelines import pipelines

        try:
            return pipelines(self.pipelines)
        except KeyError as error:
            raise ConfigError(str(error.args[0])) from None

    def tables(self) -> list[TableRef]:
        """The tables of the pipelines this Config covers, each pipeline's upstream first."""
        return [self.table(t.key) for p in self.declared_pipelines() for t in p.tables]

    def flows(self) -> tuple[Flow, ...]:
        """The flows of the pipelines this Config covers, each pipeline's upstream first."""
        return tuple(f for p in self.declared_pipelines() for f in p.flows)

    def landing_dir(self, dataset: str) -> str:
        """The landing folder of one input dataset, ``<landing>/<dataset>``."""
        return path_under(self.landing, validate_identifier(dataset, "dataset"))

    @property
    def checkpoints_folder(self) -> str:
        """The folder that holds every stream's checkpoint: ``checkpoint_root``, by default
        ``<lake>/_checkpoints`` (outside every table folder, where VACUUM never looks)."""
        return (self.checkpoint_root or f"{self.lake}/_checkpoints").rstrip("/")

    def checkpoint(self, stream_name: str) -> str:
        """The checkpoint folder of one named stream; one per stream, never shared."""
        return f"{self.checkpoints_folder}/{validate_identifier(stream_name, 'stream name')}"

    def schema_location(self, stream_name: str) -> str:
        """Where Auto Loader keeps the inferred schema of one stream (Databricks only)."""
        return (
            f"{self.checkpoints_folder}/_schemas/{validate_identifier(stream_name, 'stream name')}"
        )
