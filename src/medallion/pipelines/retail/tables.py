"""The retail tables: clickstream events and customer changes, bronze to gold.

Each table is declared here once: its schema, its properties and the columns OPTIMIZE
Z-orders it by (the columns readers filter and join on; docs/operations.md).
"""

from __future__ import annotations

from medallion.declarations import APPEND_ONLY, Table
from medallion.pipelines.blocks import CHANGE_FEED, bronze_table, quarantine_table
from medallion.pipelines.retail.contract import CUSTOMER_CHANGES, EVENTS
from medallion.transforms.history import history_schema

_CUSTOMER_STATE = (
    "customer_id STRING NOT NULL, name STRING, email STRING, country STRING, segment STRING, "
    "sequence_num BIGINT NOT NULL, updated_at TIMESTAMP, operation STRING, "
    "_ingested_at TIMESTAMP, _source_file STRING"
)

# Append-only, read in commit order by silver's stream and by ingestion time by people.
BRONZE_EVENTS = bronze_table(EVENTS)
SILVER_EVENTS = Table(
    "silver",
    "events",
    "event_id STRING NOT NULL, event_type STRING NOT NULL, user_id STRING NOT NULL, "
    "product_id STRING NOT NULL, category STRING, revenue DECIMAL(18,4), "
    "event_timestamp TIMESTAMP NOT NULL, event_date DATE NOT NULL, "
    "_ingested_at TIMESTAMP, _source_file STRING",
    # Read by date (dashboards, gold's rebuilds) and looked up by event_id.
    zorder=("event_date", "event_id"),
    carries_input_fields=True,  # --carry-column (docs/operations.md)
)
EVENTS_QUARANTINE = quarantine_table(EVENTS, "event_id")
HOURLY_PRODUCT_METRICS = Table(
    "gold",
    "hourly_product_metrics",
    "window_start TIMESTAMP NOT NULL, product_id STRING NOT NULL, window_end TIMESTAMP NOT NULL, "
    "views BIGINT NOT NULL, add_to_carts BIGINT NOT NULL, purchases BIGINT NOT NULL, "
    "revenue DECIMAL(28,4) NOT NULL, unique_users BIGINT NOT NULL",
    # The MERGE keys of gold, and how dashboards slice it (time range, then product).
    zorder=("window_start", "product_id"),
)
# The users counted in gold's unique_users: one row per (hour, product, user) ever seen.
HOURLY_PRODUCT_USERS = Table(
    "gold",
    "hourly_product_users",
    "window_start TIMESTAMP NOT NULL, product_id STRING NOT NULL, user_id STRING NOT NULL, "
    "event_date DATE NOT NULL",
    APPEND_ONLY,
    # Files by date prune a lookup of a batch's keys among the dates it touches.
    zorder=("event_date", "window_start", "product_id"),
)
BRONZE_CUSTOMERS = bronze_table(CUSTOMER_CHANGES)
SILVER_CUSTOMERS = Table(
    "silver",
    "customers",
    _CUSTOMER_STATE,
    CHANGE_FEED,
    # The MERGE key, and the join key of the revenue enrichment.
    zorder=("customer_id",),
)
CUSTOMER_TOMBSTONES = Table(
    "silver",
    "customer_tombstones",
    "customer_id STRING NOT NULL, sequence_num BIGINT NOT NULL, updated_at TIMESTAMP, "
    "_ingested_at TIMESTAMP",
    zorder=("customer_id",),
)
# Every version of every customer (SCD type 2, transforms/history.py), with its validity.
CUSTOMERS_HISTORY = Table(
    "silver",
    "customers_history",
    history_schema(
        "customer_id STRING", "name STRING, email STRING, country STRING, segment STRING"
    ),
    CHANGE_FEED,
    # The MERGE key; point-in-time joins look customers up by id.
    zorder=("customer_id",),
    history=True,
)
CUSTOMERS_QUARANTINE = quarantine_table(CUSTOMER_CHANGES, "customer_id")
CUSTOMER_CHANGES = Table(
    "gold",
    "customer_changes",
    f"{_CUSTOMER_STATE}, _change_type STRING NOT NULL, _commit_version BIGINT NOT NULL, "
    "_commit_timestamp TIMESTAMP NOT NULL",
    APPEND_ONLY,
    # The audit trail is read per customer.
    zorder=("customer_id",),
)
DAILY_REVENUE_BY_COUNTRY = Table(
    "gold",
    "daily_revenue_by_country",
    "event_date DATE NOT NULL, country STRING NOT NULL, revenue DECIMAL(28,4) NOT NULL, "
    "purchases BIGINT NOT NULL",
    zorder=("event_date", "country"),
)
# Every purchase gold/daily_revenue_by_country counts, under the country it counts it under
# (pipelines/retail/counted_purchases.py); its Change Data Feed is what gold adds.
REVENUE_PURCHASES = Table(
    "gold",
    "revenue_purchases",
    "event_id STRING NOT NULL, user_id STRING NOT NULL, event_timestamp TIMESTAMP NOT NULL, "
    "event_date DATE NOT NULL, revenue DECIMAL(18,4), country STRING NOT NULL",
    CHANGE_FEED,
    # A changed customer's purchases are looked up by user_id; the MERGE key is event_id.
    zorder=("user_id", "event_id"),
    ledger=True,
)

TABLES = (
    BRONZE_EVENTS,
    SILVER_EVENTS,
    EVENTS_QUARANTINE,
    HOURLY_PRODUCT_METRICS,
    HOURLY_PRODUCT_USERS,
    BRONZE_CUSTOMERS,
    SILVER_CUSTOMERS,
    CUSTOMER_TOMBSTONES,
    CUSTOMERS_HISTORY,
    CUSTOMERS_QUARANTINE,
    CUSTOMER_CHANGES,
    DAILY_REVENUE_BY_COUNTRY,
    REVENUE_PURCHASES,
)
