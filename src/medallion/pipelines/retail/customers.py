"""The customer changes' silver: a sequence-aware MERGE, deletes included, and their history."""

from __future__ import annotations

from medallion.pipelines.blocks import ApplyChanges
from medallion.pipelines.retail import tables as t
from medallion.pipelines.retail.contract import CUSTOMER_CHANGES
from medallion.pipelines.retail.transforms.customers import CUSTOMERS, validate_changes
from medallion.streams.apply_history import KeptHistory
from medallion.transforms.change_records import FULL_ROW_SEQUENCE

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
