"""The customer change-data streams: bronze, sequence-aware MERGE and history, CDF audit."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from medallion.config import Config
from medallion.declarations import Flow
from medallion.erasure_log import erased_versions
from medallion.pipelines.blocks import ApplyChanges
from medallion.pipelines.retail import tables as t
from medallion.pipelines.retail.contract import CUSTOMER_CHANGES
from medallion.pipelines.retail.transforms.customers import CUSTOMERS, validate_changes
from medallion.streams.apply_history import KeptHistory
from medallion.streams.sinks import Trigger, start_append
from medallion.streams.sources import delta_stream
from medallion.transforms.change_records import FULL_ROW_SEQUENCE

CDF_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


# Every version of every customer, and the setting that names the columns it tracks.
KEPT_HISTORY = KeptHistory(
    t.CUSTOMERS_HISTORY.key, t.BRONZE_CUSTOMERS.key, "track_history_columns", CUSTOMERS
)

# The batch factory of ``silver_customers``: full-row customer changes, by (sequence_num, an
# equal one's DELETE over UPDATE over INSERT, updated_at), applied with deletes
# (pipelines/blocks/changes.py), and every version of every customer kept in
# silver/customers_history (streams/apply_history.py).
silver_customers_batch = ApplyChanges(
    (CUSTOMERS.key,),
    FULL_ROW_SEQUENCE,
    apply_as_deletes="operation = 'DELETE'",
    contract=CUSTOMER_CHANGES,
    quarantine=t.CUSTOMERS_QUARANTINE,
    validate=validate_changes,
    tombstones_table=t.CUSTOMER_TOMBSTONES,
    history=KEPT_HISTORY,
)


def start_gold_customer_changes(
    spark: SparkSession, config: Config, flow: Flow, trigger: Trigger
) -> StreamingQuery:
    """Every change of silver/customers, from its Change Data Feed, appended to the audit."""
    source = flow.source.key
    checkpoint = config.checkpoint(flow.name)
    changes = delta_stream(
        spark,
        config.table(source),
        config.source_options(flow.name),
        change_feed=True,
        checkpoint=checkpoint,
    )
    erased = erased_versions(spark, config, source)
    if erased:  # an erasure's DELETE is no change to audit (medallion/erasure_log.py)
        changes = changes.where(~F.col("_commit_version").isin(erased))
    (audit,) = flow.outputs
    return start_append(
        changes.select(*CUSTOMERS.change_columns, *CDF_COLUMNS),
        config.table(audit.key),
        checkpoint,
        trigger,
        flow.name,
    )
