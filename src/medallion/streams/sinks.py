"""Stream sinks: Delta append, foreachBatch, idempotent writes and MERGE helpers."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from medallion.config import Config
from medallion.conflicts import retry_on_conflict
from medallion.contracts import FieldRule
from medallion.declarations import Flow, Landing, Table
from medallion.locks import check_lease
from medallion.sql_names import TableRef
from medallion.storage import read_text
from medallion.streams.checkpoints import discard_abandoned_writes
from medallion.streams.sources import delta_stream, input_lines
from medallion.tables import save
from medallion.transforms.bronze import to_bronze

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"


@dataclass(frozen=True)
class Trigger:
    """How a stream is triggered: drain what is available and stop, or every N seconds."""

    available_now: bool = True
    interval_seconds: float = 5.0

    def as_kwargs(self) -> dict:
        """Keyword arguments for ``DataStreamWriter.trigger``."""
        if self.available_now:
            return {"availableNow": True}
        return {"processingTime": f"{self.interval_seconds} seconds"}


@contextmanager
def idempotent_writes(spark: SparkSession, app_id: str, version: int) -> Iterator[None]:
    """Tag every Delta write in the block with (``app_id``, ``version``).

    Delta records the pair in each target table's log and skips a later write whose version is
    not newer, so a micro-batch replayed after a crash writes nothing twice.
    """
    spark.conf.set(TXN_APP_ID, app_id)
    spark.conf.set(TXN_VERSION, str(version))
    try:
        yield
    finally:
        spark.conf.unset(TXN_APP_ID)
        spark.conf.unset(TXN_VERSION)


def query_id(spark: SparkSession, checkpoint: str) -> str:
    """The stable id of the query that owns ``checkpoint`` (from its ``metadata`` file).

    It survives restarts and changes when the checkpoint is deleted, which makes it the right
    scope for ``txnAppId``: a rebuilt checkpoint starts again at batch 0 with a new id.
    """
    return json.loads(read_text(spark, f"{checkpoint}/metadata"))["id"]


def transaction_app_id(stream_name: str | None, checkpoint: str) -> Callable[[SparkSession], str]:
    """The app id a stream's writes are tagged with, ``medallion:<stream>:<query id>``, or the
    bare query id when ``stream_name`` is None (as Delta's own streaming sink tags a batch).

    Read from the checkpoint at the first batch and then remembered: that read may be a Spark
    job, and the id cannot change under a running query. Make one per started query.
    """
    known: list[str] = []

    def app_id(spark: SparkSession) -> str:
        if not known:
            query = query_id(spark, checkpoint)
            known.append(query if stream_name is None else f"medallion:{stream_name}:{query}")
        return known[0]

    return app_id


def append_batch(
    df: DataFrame,
    table: TableRef,
    merge_schema: bool = False,
    txn: tuple[str, int] | None = None,
    user_metadata: str | None = None,
) -> None:
    """Append a batch DataFrame to a Delta table (by path locally, by name in Unity Catalog);
    ``merge_schema`` adds the DataFrame's new columns to the table. ``txn`` is the write's
    (``txnAppId``, ``txnVersion``) as options of this write alone, for writes that run side by
    side in one session (:func:`idempotent_writes` tags every write of the session), and
    ``user_metadata`` its commit's ``userMetadata``."""
    writer = df.write.format("delta").mode("append")
    if merge_schema:
        writer = writer.option("mergeSchema", "true")
    if txn is not None:
        writer = writer.option("txnAppId", txn[0]).option("txnVersion", str(txn[1]))
    if user_metadata is not None:
        writer = writer.option("userMetadata", user_metadata)
    save(writer, table)


def merge_into(
    spark: SparkSession,
    table: TableRef,
    rows: DataFrame,
    keys: Sequence[str],
    clauses: str,
    schema_evolution: bool = False,
) -> None:
    """``MERGE INTO`` the table from ``rows`` on equal ``keys``.

    SQL rather than ``DeltaTable.merge``, so it also runs over Spark Connect without Delta's
    Connect plugin; it is the same MERGE command, and honours ``txnAppId``/``txnVersion`` alike.
    ``schema_evolution`` adds the source's new columns to the table (``MERGE WITH SCHEMA
    EVOLUTION``, the MERGE form of ``mergeSchema``). A MERGE that loses a race with a
    concurrent commit (OPTIMIZE) is run again (medallion/conflicts.py).
    """
    condition = " AND ".join(f"t.`{k}` = s.`{k}`" for k in keys)
    merge = "MERGE WITH SCHEMA EVOLUTION INTO" if schema_evolution else "MERGE INTO"
    statement = f"{merge} {table.sql_name} AS t USING {{rows}} AS s ON {condition} {clauses}"
    retry_on_conflict(lambda: spark.sql(statement, rows=rows), f"MERGE INTO {table.key}")


def merge_insert_new(
    spark: SparkSession,
    table: TableRef,
    rows: DataFrame,
    keys: Sequence[str],
    schema_evolution: bool = False,
) -> None:
    """Insert the rows whose keys are not yet in the table; rows already there are left alone."""
    merge_into(spark, table, rows, keys, "WHEN NOT MATCHED THEN INSERT *", schema_evolution)


def merge_upsert(
    spark: SparkSession, table: TableRef, rows: DataFrame, keys: Sequence[str]
) -> None:
    """Replace the rows with matching keys and insert the others."""
    clauses = "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    merge_into(spark, table, rows, keys, clauses)


def start_append(
    df: DataFrame, table: TableRef, checkpoint: str, trigger: Trigger, query_name: str
) -> StreamingQuery:
    """Start a stream appending to a Delta table; Delta's sink makes each batch exactly-once."""
    discard_abandoned_writes(checkpoint)
    writer = (
        df.writeStream.format("delta")
        .queryName(query_name)
        .outputMode("append")
        .option("checkpointLocation", checkpoint)
        .trigger(**trigger.as_kwargs())
    )
    if table.path is not None:
        return writer.start(table.path)
    return writer.toTable(table.qualified_name)


def start_bronze_append(
    spark: SparkSession,
    config: Config,
    flow: Flow,
    trigger: Trigger,
    fields: Sequence[FieldRule] = (),
) -> StreamingQuery:
    """Start a bronze flow: every input line of its dataset (landing files or its topic),
    unchanged, appended to its one table, with ``fields`` of each line as text columns. A
    flow's ``start`` is ``functools.partial(start_bronze_append, fields=...)``."""
    if not isinstance(flow.source, Landing) or len(flow.outputs) != 1:
        raise ValueError(f"flow {flow.name}: a bronze append reads a dataset into one table")
    lines = to_bronze(input_lines(spark, config, flow.source.dataset), fields)
    table = config.table(flow.outputs[0].key)
    return start_append(lines, table, config.checkpoint(flow.name), trigger, flow.name)


def start_foreach_batch(
    df: DataFrame,
    process: Callable[[DataFrame, int], None],
    checkpoint: str,
    trigger: Trigger,
    query_name: str,
) -> StreamingQuery:
    """Start a stream that hands every micro-batch to ``process(batch_df, batch_id)``, unless
    this run has lost its lock on the stream meanwhile (medallion/locks.py): then the batch
    fails with :class:`~medallion.locks.LeaseLost` before it writes."""
    discard_abandoned_writes(checkpoint)

    def leased(batch: DataFrame, batch_id: int) -> None:
        check_lease(checkpoint)
        process(batch, batch_id)

    return (
        df.writeStream.queryName(query_name)
        .option("checkpointLocation", checkpoint)
        .trigger(**trigger.as_kwargs())
        .foreachBatch(leased)
        .start()
    )


# A flow's batch factory: (config, flow, checkpoint, stream=None) -> its foreachBatch function;
# ``stream`` names another writer than the flow that runs the same batch (a quarantine replay).
BatchFactory = Callable[..., Callable[[DataFrame, int], None]]


def start_delta_foreach_batch(
    spark: SparkSession,
    config: Config,
    flow: Flow,
    trigger: Trigger,
    make_batch: BatchFactory | None = None,
) -> StreamingQuery:
    """Start ``flow``'s stream: its Delta source read with that stream's options (through its
    Change Data Feed when the flow declares ``change_feed``: each batch is the source's change
    rows, with ``_change_type``, ``_commit_version`` and ``_commit_timestamp``), handed to its
    ``foreachBatch`` function (made by ``make_batch``, default its declared batch), with its
    own checkpoint."""
    assert isinstance(flow.source, Table)
    checkpoint = config.checkpoint(flow.name)
    source = delta_stream(
        spark,
        config.table(flow.source.key),
        config.source_options(flow.name),
        change_feed=flow.change_feed,
        checkpoint=checkpoint,
    )
    if make_batch is None:
        process = flow.batch_function(config, checkpoint)
    else:
        process = make_batch(config, flow, checkpoint)
    return start_foreach_batch(source, process, checkpoint, trigger, flow.name)


def start_flow(
    spark: SparkSession, config: Config, flow: Flow, trigger: Trigger, fused: Sequence[str] = ()
) -> StreamingQuery:
    """Start one flow's stream: through its ``start``, or, for a flow that declares only its
    batch, a Delta source read handed to that batch. A head carries the members ``fused``."""
    if flow.start is None:
        return start_delta_foreach_batch(spark, config, flow, trigger)
    if flow.fuses:
        return flow.start(spark, config, flow, trigger, fused=fused)
    return flow.start(spark, config, flow, trigger)
