"""Queries of a retail lake that people run by hand: the exploration notebook runs them, and
docs/retail.md shows them."""

from __future__ import annotations

from medallion.config import Config


def customer_at_purchase(config: Config) -> str:
    """The SQL that gives each purchase with its customer's segment and country at the time of
    the purchase: the version of ``silver/customers_history`` (SCD type 2) valid then, or
    NULLs when the customer had none (docs/retail.md, "Customer history")."""
    events = config.table("silver/events").sql_name
    history = config.table("silver/customers_history").sql_name
    return f"""SELECT e.event_id, e.user_id, e.event_timestamp, h.segment, h.country
FROM {events} AS e
LEFT JOIN {history} AS h
  ON h.customer_id = e.user_id
 AND h.valid_from <= e.event_timestamp
 AND (h.valid_to IS NULL OR e.event_timestamp < h.valid_to)
WHERE e.event_type = 'purchase'
ORDER BY e.event_timestamp"""
