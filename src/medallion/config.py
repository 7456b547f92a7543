"""One configuration value: where every table and checkpoint lives, and how streams run.

Locally tables are path-based Delta tables under ``<lake>/<layer>/<table>`` and are also
registered by name (``medallion.bronze_events``) in the session catalog. On Databricks the
same tables are Unity Catalog names (``<catalog>.<schema>.bronze_events``) and checkpoints
live under a Volume. Changing where a table lives touches this module only.

A Config is a plain value: it knows no pipeline. What it means for the declared pipelines
(the pipelines, tables and flows it covers, its settings' values, whether its settings and
carried columns name declared ones) is medallion/deployment.py's.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from medallion.declarations import LAYERS
from medallion.errors import ConfigError
from medallion.source_options import (
    DEFAULT_LANDING_MAX_BYTES_PER_TRIGGER,
    DeltaSourceOptions,
    KafkaSourceOptions,
)
from medallion.sql_names import (
    CONTROL_CHARACTERS,
    TableRef,
    flat_table_name,
    normalize_path,
    path_under,
    quote_identifier,
    quote_principal,
    validate_identifier,
)

FileSourceKind = Literal["files", "autoloader"]
SourceKind = Literal["files", "kafka"]


def parse_pairs(
    pairs: str | Sequence[str], what: str = "setting", dotted: bool = False
) -> dict[str, str]:
    """``NAME=VALUE`` pairs, as a list or comma-separated (a job parameter); each name an
    identifier, or identifiers joined by dots when ``dotted``.

    >>> parse_pairs("fraud_risk_score_above=0.9, fraud_new_account_days=14")
    {'fraud_risk_score_above': '0.9', 'fraud_new_account_days': '14'}
    """
    items = pairs.split(",") if isinstance(pairs, str) else pairs
    identifier = functools.partial(validate_identifier, what=f"{what} name")
    parsed: dict[str, str] = {}
    for item in (i.strip() for i in items):
        if not item:
            continue
        name, equals, value = item.partition("=")
        if not equals or not value.strip():
            raise ConfigError(f"a {what} is written NAME=VALUE, not {item!r}")
        parts = name.strip().split(".") if dotted else [name.strip()]
        parsed[".".join(map(identifier, parts))] = value.strip()
    return parsed


def parse_settings(pairs: str | Sequence[str]) -> dict[str, str]:
    """Pipeline settings written ``NAME=VALUE`` (``--set``, the ``settings`` job parameter);
    an expectation's name is dotted: ``expect.events.revenue_not_negative=warn``."""
    return parse_pairs(pairs, "setting", dotted=True)


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
            if CONTROL_CHARACTERS.search(value):
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
            {key: _carried_names(names) for key, names in self.carried_columns.items()},
        )
        names = (self.pipelines,) if isinstance(self.pipelines, str) else self.pipelines
        names = tuple(validate_identifier(n, "pipeline name") for n in names)
        object.__setattr__(self, "pipelines", tuple(dict.fromkeys(names)))

    def carried(self, key: str) -> tuple[str, ...]:
        """The input fields carried into the table ``key`` (empty unless some are asked for)."""
        return self.carried_columns.get(key, ())

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
        """Where the table ``key`` (``<layer>/<name>``) lives, for example
        ``table("silver/events")``; which tables a pipeline declares is the registry's."""
        layer, _, name = key.partition("/")
        if layer not in LAYERS or not name:
            raise ConfigError(f"a table is <layer>/<name> with a layer of {LAYERS}, not {key!r}")
        validate_identifier(name, "table")
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


def _carried_names(names: Sequence[str] | str) -> tuple[str, ...]:
    """The carried columns of one table, as a tuple of identifiers."""
    names = (names,) if isinstance(names, str) else tuple(names)
    return tuple(validate_identifier(n, "carried column") for n in names)
