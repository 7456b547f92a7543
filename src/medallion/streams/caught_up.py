"""Whether a stream that reads a Delta table has anything left to read.

An available-now run does not start a stream that has read every version of its source:
starting one costs seconds that a small run feels (the source's snapshot, planning, a trigger
that finds nothing), and on two cores it takes them from the streams that do have work.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from medallion.config import Config
from medallion.delta_log import committed_version, table_id
from medallion.streams import checkpoint_files as checkpoints
from medallion.streams.flows import Flow, fusion_head


def has_read_everything(spark: SparkSession, config: Config, flow: Flow) -> bool:
    """True when ``flow`` reads a Delta table as a stream and its checkpoint's last batch, a
    committed one, ended after the table's latest version, of the same table (its id).

    False whenever that cannot be told for sure: a landing or Kafka source, a fused flow, a
    stream of several sources, a batch planned but not committed, a checkpoint or log not
    readable from here, a table with no checksum file. Such a flow simply runs.
    """
    source = flow.source.key
    if source.startswith("landing/") or flow.fuses or fusion_head(flow.name) is not None:
        return False
    checkpoint = config.checkpoint(flow.name)
    committed = checkpoints.committed_batch(checkpoint)
    if committed is None or checkpoints.planned_batch(checkpoint) != committed:
        return False
    # A second source (a change data feed) may have news of its own.
    if checkpoints.source_count(checkpoint) != 1:
        return False
    position = checkpoints.delta_position(checkpoint)
    if position is None or position.starting or position.index != -1:
        return False
    table = config.table(source)
    try:
        latest = committed_version(spark, table)
    except LookupError:
        return False
    if latest is None:
        return False
    # The id from the very version compared, not from a newer one committed meanwhile.
    recorded_id = table_id(spark, table, latest)
    return (
        recorded_id is not None and position.table_id == recorded_id and position.version > latest
    )
