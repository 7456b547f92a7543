"""What a pipeline is made of, declared once: its tables, its flows, and the pipeline itself.

Everything generic (creating and registering tables, running flows, maintenance, status,
reset, lineage) reads these declarations; a pipeline's package (``medallion/pipelines/<name>``)
holds the only place each of its tables and flows is described.

>>> events = Table("bronze", "events", "value STRING")
>>> events.key
'bronze/events'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from medallion.pipeline_settings import AnySetting
from medallion.sql_names import validate_identifier

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from medallion.config import Config
    from medallion.contract_rules import Contract
    from medallion.subjects import Subjects

LAYERS = ("bronze", "silver", "gold")

# Columns bronze adds to every input line; RAW_COLUMN holds the line as it landed.
RAW_COLUMN = "_raw"
INGEST_METADATA = f"{RAW_COLUMN} STRING, _source_file STRING, _ingested_at TIMESTAMP"
# Where a record was read from Kafka; NULL for rows read from files, so both sources share a schema.
KAFKA_METADATA = (
    "_kafka_topic STRING, _kafka_partition INT, _kafka_offset BIGINT, _kafka_timestamp TIMESTAMP"
)

# Streaming tables take many small commits: let Delta compact and size files as it writes
# (where medallion does not compact them itself: medallion/compaction.py). A checkpoint of the
# log every 100 commits rather than 10: writing one stalls the commit that triggers it, and a
# stream commits to each of its tables every batch.
STREAMING_TABLE_PROPERTIES: Mapping[str, str] = MappingProxyType(
    {
        "delta.autoOptimize.optimizeWrite": "true",
        "delta.autoOptimize.autoCompact": "true",
        "delta.checkpointInterval": "100",
    }
)
APPEND_ONLY = MappingProxyType({**STREAMING_TABLE_PROPERTIES, "delta.appendOnly": "true"})


@dataclass(frozen=True)
class Maintenance:
    """What ``medallion maintain`` does to a table: OPTIMIZE it, VACUUM it, and the least
    VACUUM retention it takes in hours (None: the run's; a longer one wins over the run's)."""

    optimize: bool = True
    vacuum: bool = True
    min_retention_hours: float | None = None


@dataclass(frozen=True)
class Table:
    """One Delta table: where it sits (``layer``/``name``), its schema (DDL), its table
    properties, its layout (``partitioned_by`` columns, or liquid clustering by
    ``clustered_by``), the columns OPTIMIZE Z-orders it by (empty: bin-packing only; a
    clustered table is clustered instead), its maintenance policy, and whether it is a
    quarantine, a history or a ledger."""

    layer: str
    name: str
    schema: str
    properties: Mapping[str, str] = field(
        default_factory=lambda: STREAMING_TABLE_PROPERTIES, hash=False
    )
    zorder: tuple[str, ...] = ()
    # Where its flow puts the records it refuses, with a reason (counted in a run's summary).
    # Not append-only: a quarantine replay deletes the records it promotes (ops/replay.py).
    quarantine: bool = False
    # Its flow can carry input fields the contract does not name into it, as STRING columns,
    # when a deployment asks for them (Config.carried_columns, --carry-column).
    carries_input_fields: bool = False
    partitioned_by: tuple[str, ...] = ()
    clustered_by: tuple[str, ...] = ()
    maintenance: Maintenance = field(default_factory=Maintenance)
    # An SCD type 2 history (streams/apply_history.py): its Change Data Feed records its version
    # rows being rewritten, so `medallion changes` reads it only when asked by name.
    history: bool = False
    # A stream's ledger of what its gold counts (pipelines/retail/counted_purchases.py): its
    # Change Data Feed is what the stream adds to gold, read by `medallion changes` only when
    # asked by name, like a history's.
    ledger: bool = False

    def __post_init__(self) -> None:
        validate_identifier(self.name, "table name")
        if self.layer not in LAYERS:
            raise ValueError(f"table {self.name!r}: unknown layer {self.layer!r}")
        declared = set(self.columns)
        for what in ("partitioned_by", "clustered_by", "zorder"):
            unknown = [c for c in getattr(self, what) if c not in declared]
            if unknown:
                raise ValueError(f"table {self.key}: {what} names no column {unknown}")
        if self.clustered_by and (self.partitioned_by or self.zorder):
            raise ValueError(
                f"table {self.key}: a clustered table is neither partitioned nor Z-ordered "
                "(OPTIMIZE clusters it)"
            )

    @property
    def key(self) -> str:
        """The table's key, for example ``silver/events``."""
        return f"{self.layer}/{self.name}"

    @property
    def change_data_feed(self) -> bool:
        """True when the table records its Change Data Feed (``medallion changes`` reads it)."""
        return self.properties.get("delta.enableChangeDataFeed", "").lower() == "true"

    @property
    def feed_read_by_name_only(self) -> bool:
        """True when ``medallion changes`` reads its feed only when the table is named."""
        return self.history or self.ledger

    @property
    def columns(self) -> tuple[str, ...]:
        """The names of its declared columns, in order.

        >>> Table("gold", "totals", "day DATE NOT NULL, amount DECIMAL(28,4), tags ARRAY<STRING>").columns
        ('day', 'amount', 'tags')
        """
        return tuple(name for name, _ in self.column_types)

    @property
    def column_types(self) -> tuple[tuple[str, str], ...]:
        """(name, type in lower case) of each declared column, in order."""
        columns, depth, start = [], 0, 0
        for index, char in enumerate(f"{self.schema},"):
            depth += (char in "(<") - (char in ")>")
            if char == "," and depth == 0:
                name, _, rest = self.schema[start:index].strip().partition(" ")
                columns.append((name.strip("`"), rest.strip().lower()))
                start = index + 1
        return tuple(columns)


@dataclass(frozen=True)
class Landing:
    """Input records of one dataset: files under ``<landing>/<dataset>/`` or a Kafka topic."""

    dataset: str

    @property
    def key(self) -> str:
        return f"landing/{self.dataset}"


@dataclass(frozen=True)
class Flow:
    """One named stream: its query name (also its checkpoint folder), layer, what it reads as a
    stream (``source``) and as static tables (``joins``), the tables it writes, and how it
    starts.

    ``change_feed`` says the source, a table that records one (``delta.enableChangeDataFeed``),
    is read through its change data feed: a ``batch`` flow gets its change rows, with
    ``_change_type``, ``_commit_version`` and ``_commit_timestamp``. ``fuses`` names the flows
    downstream of it whose work its batches carry out too, in order (streams/fusion.py): those
    flows run as streams of their own only while they catch up.
    ``min_interval_seconds`` is the shortest trigger interval it takes when streaming: a flow
    whose freshness matters less than the CPU it would take from the others polls less often.

    ``start(spark, config, flow, trigger)`` starts its stream, given the flow itself: its name
    (its checkpoint), source and tables come from here, never spelled again (a flow that
    ``fuses`` others also takes ``fused=``, the names of those it carries).

    ``batch`` is the batch factory of a flow that hands each micro-batch of its Delta source to
    a ``foreachBatch`` function: ``batch(config, flow, checkpoint, stream=None)`` makes the
    function, given the flow itself, whose name it writes as unless ``stream`` names another
    writer that runs it (a quarantine replay); :meth:`batch_function` calls it. Such a flow
    needs no ``start``: the engine starts it from its source.
    """

    name: str
    layer: str
    source: Table | Landing
    outputs: tuple[Table, ...]
    start: Callable[..., object] | None = None
    joins: tuple[Table, ...] = ()
    change_feed: bool = False
    fuses: tuple[str, ...] = ()
    min_interval_seconds: float = 0.0
    batch: Callable[..., Callable[..., None]] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        validate_identifier(self.name, "stream name")
        if self.start is None and (self.batch is None or isinstance(self.source, Landing)):
            raise ValueError(f"flow {self.name!r}: give it a start, or a batch and a Delta source")
        if self.change_feed and not getattr(self.source, "change_data_feed", False):
            raise ValueError(f"flow {self.name!r}: {self.source.key} has no change data feed")

    def batch_function(
        self, config: Config, checkpoint: str, stream: str | None = None
    ) -> Callable[[DataFrame, int], None]:
        """This flow's ``foreachBatch`` function, keeping its state under ``checkpoint`` and
        writing as ``stream`` (default: the flow's own name)."""
        if self.batch is None:
            raise ValueError(f"flow {self.name!r} declares no batch")
        return self.batch(config, self, checkpoint, stream)

    @property
    def inputs(self) -> tuple[str, ...]:
        """The keys it reads: its source first (``landing/<dataset>`` for input records)."""
        return (self.source.key, *(t.key for t in self.joins))

    @property
    def writes(self) -> tuple[str, ...]:
        """The keys of the tables it writes."""
        return tuple(t.key for t in self.outputs)

    @property
    def reads(self) -> str:
        """What it reads, for people: ``silver/events + silver/customers``."""
        feed = " (change data feed)" if self.change_feed else ""
        return " + ".join((f"{self.source.key}{feed}", *(t.key for t in self.joins)))


def landing_datasets(flows: Sequence[Flow]) -> list[str]:
    """The datasets some of ``flows`` read as input records (``landing/<dataset>``), sorted."""
    return sorted({f.source.dataset for f in flows if isinstance(f.source, Landing)})


@dataclass(frozen=True)
class View:
    """One chart or table of a pipeline's dashboard: a query over tables named by their
    ``flat_name`` (``gold_fraud_alerts``), in SQL that Databricks SQL and DuckDB read alike.

    A ``line`` or ``bar`` chart puts column ``x`` on x and ``y`` on y, a trace per value of
    ``color``; a ``table`` shows ``columns``. ``choose`` names a column whose value the reader
    picks (a filter on Databricks, a list on the local page).
    """

    name: str
    title: str
    sql: str
    tables: tuple[str, ...]
    kind: str  # line, bar or table: Plotly's and Lakeview's names alike
    x: str = ""
    y: str = ""
    color: str | None = None
    x_type: str = "categorical"  # temporal, categorical or quantitative
    columns: tuple[str, ...] = ()
    choose: str | None = None

    def __post_init__(self) -> None:
        validate_identifier(self.name, "view name")
        if self.kind not in ("line", "bar", "table"):
            raise ValueError(f"view {self.name}: kind is line, bar or table, not {self.kind!r}")
        if (self.kind == "table") != bool(self.columns) or (self.kind != "table") != bool(
            self.x and self.y
        ):
            raise ValueError(f"view {self.name}: a table names columns, a chart x and y")


@dataclass(frozen=True)
class QuarantineReplay:
    """How ``medallion quarantine replay`` checks the records of a quarantine again and
    promotes those that now pass (ops/replay.py).

    The records' bronze rows go through ``validate(bronze, expectations=...)``, the validation
    of ``flow``, the silver flow that quarantined them; those that now pass go through that
    flow's batch. ``key`` is silver's key, by which a record whose key silver
    already holds is a duplicate (empty for change records, which the flow's sequence-aware
    MERGE applies whatever their arrival). ``feeds`` names the flows fused downstream of silver
    whose batch is given the rows the replay inserted (a flow that runs from silver's Delta
    source reads them itself). ``also`` names other flows from the same bronze table whose
    batch is given the promoted bronze rows too (a history of the same change records).
    """

    quarantine: Table
    flow: str
    dataset: str
    validate: Callable[..., object] = field(compare=False)
    key: tuple[str, ...] = ()
    feeds: tuple[str, ...] = ()
    also: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.quarantine.quarantine:
            raise ValueError(f"{self.quarantine.key} is not declared a quarantine")


# Writes synthetic input into a landing folder: (landing, records, files, seed, faults, and the
# sizes of datasets by name, ``customers=200``, ignoring other pipelines' datasets) -> the paths
# written, by dataset. ``records`` sizes its main dataset unless that dataset's size is given.
Generator = Callable[..., dict[str, list[str]]]


@dataclass(frozen=True)
class Pipeline:
    """A named set of tables, the flows that write them, the generator of synthetic input for
    it (``medallion generate --pipeline NAME``), the settings its flows read, the views of
    its dashboard (a page of ``medallion dashboard``, a Lakeview dashboard of the bundle), and
    the contracts of its input datasets (their expectations: medallion/expectations.py), how
    each of its quarantines is replayed, and the columns that identify a data subject
    (medallion/subjects.py; None: its tables hold no personal data)."""

    name: str
    tables: tuple[Table, ...]
    flows: tuple[Flow, ...] = field(default=())
    generate: Generator | None = field(default=None, compare=False)
    settings: tuple[AnySetting, ...] = ()
    title: str = ""
    views: tuple[View, ...] = ()
    contracts: tuple[Contract, ...] = ()
    replays: tuple[QuarantineReplay, ...] = ()
    subjects: Subjects | None = None

    def __post_init__(self) -> None:
        validate_identifier(self.name, "pipeline name")
        self._add_implied()
        declared = {t.key for t in self.tables}
        for flow in self.flows:
            undeclared = set(flow.writes) - declared
            if undeclared:
                raise ValueError(
                    f"flow {flow.name!r} of pipeline {self.name!r} writes undeclared tables "
                    f"{', '.join(sorted(undeclared))}"
                )
        for view in self.views:
            if not set(view.tables) <= declared:
                raise ValueError(
                    f"view {view.name!r} of pipeline {self.name!r} reads undeclared tables "
                    f"{', '.join(sorted(set(view.tables) - declared))}"
                )
        by_name = {f.name: f for f in self.flows}
        for replay in self.replays:
            flow = by_name.get(replay.flow)
            if flow is None or replay.quarantine not in flow.outputs:
                raise ValueError(
                    f"replay of {replay.quarantine.key}: pipeline {self.name!r} has no flow "
                    f"{replay.flow!r} that writes it"
                )
            named = (replay.flow, *replay.feeds, *replay.also)
            unbatched = [n for n in named if getattr(by_name.get(n), "batch", None) is None]
            if unbatched:
                raise ValueError(
                    f"replay of {replay.quarantine.key}: {', '.join(unbatched)} declares no batch"
                )
        if self.subjects is not None:
            self._check_subjects(self.subjects)

    def _add_implied(self) -> None:
        """The contracts and quarantine replays its flows' batches imply (a building block's,
        medallion/pipelines/blocks/: ``contract``, ``quarantine_replay(flow_name)``), after the
        declared ones, which win."""
        replays, contracts = list(self.replays), list(self.contracts)
        for flow in self.flows:
            make_replay = getattr(flow.batch, "quarantine_replay", None)
            replay = make_replay(flow.name) if make_replay is not None else None
            if replay is not None and flow.name not in {r.flow for r in replays}:
                replays.append(replay)
            contract = getattr(flow.batch, "contract", None)
            if contract is not None and contract.dataset not in {c.dataset for c in contracts}:
                contracts.append(contract)
        object.__setattr__(self, "replays", tuple(replays))
        object.__setattr__(self, "contracts", tuple(contracts))

    def _check_subjects(self, subjects: Subjects) -> None:
        """Every table of a pipeline with data subjects either holds a subject column or raw
        lines, or is recomputed from a table that holds one: an erasure misses no table."""
        unknown = set(subjects.columns) - set(landing_datasets(self.flows))
        if unknown:
            raise ValueError(
                f"pipeline {self.name!r}: subjects name datasets it does not land: "
                f"{', '.join(sorted(unknown))}"
            )
        by_key = {t.key: t for t in self.tables}
        for recompute in subjects.recomputes:
            table, source = by_key.get(recompute.table), by_key.get(recompute.source)
            if table is None or source is None or not subjects.holding_columns(source.columns):
                raise ValueError(
                    f"pipeline {self.name!r}: {recompute.table} is recomputed from "
                    f"{recompute.source}, which must be declared tables, the source with a "
                    "subject column"
                )
            if recompute.scope not in table.columns:
                raise ValueError(f"{recompute.table} has no scope column {recompute.scope!r}")
        for table in self.tables:
            if not (
                subjects.holding_columns(table.columns)
                or RAW_COLUMN in table.columns
                or subjects.recompute_of(table.key)
            ):
                raise ValueError(
                    f"pipeline {self.name!r}: {table.key} has no subject column "
                    f"({', '.join(subjects.column_names)}) and no raw line, and is not "
                    "declared recomputed: an erasure would miss it"
                )
