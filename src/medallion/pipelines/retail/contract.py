"""Retail's input contracts: what an event and a customer change are (medallion/contracts.py
holds the rules every contract is made of)."""

from __future__ import annotations

from pyspark.sql import Column

from medallion.contracts import (
    OPERATIONS,
    FieldRule,
    field_missing,
    field_text,
    make_rule,
    record_reason,
)

EVENT_TYPES = ("view", "add_to_cart", "purchase")


EVENT_FIELDS: tuple[FieldRule, ...] = (
    FieldRule("event_id", "string", True),
    FieldRule("event_type", "string", True, EVENT_TYPES),
    FieldRule("user_id", "string", True),
    FieldRule("product_id", "string", True),
    FieldRule("category", "string", False),
    FieldRule("revenue", "money", False),
    FieldRule("event_timestamp", "timestamp", True),
)

CUSTOMER_FIELDS: tuple[FieldRule, ...] = (
    FieldRule("customer_id", "string", True),
    FieldRule("name", "string", False),
    FieldRule("email", "string", False),
    FieldRule("country", "string", False),
    FieldRule("segment", "string", False),
    FieldRule("operation", "string", True, OPERATIONS),
    FieldRule("sequence_num", "integer", True),
    FieldRule("updated_at", "timestamp", True),
)


def event_reason(raw: Column, doc: Column) -> Column:
    """Why a raw event line is not a valid event, or NULL when it is valid (reads the columns
    of ``field_value_stages(..., EVENT_FIELDS)``)."""
    is_purchase = field_text("event_type") == "purchase"
    no_revenue = make_rule(is_purchase & field_missing("revenue"), "purchase without revenue")
    return record_reason(raw, doc, EVENT_FIELDS, (no_revenue,))


def customer_reason(raw: Column, doc: Column) -> Column:
    """Why a raw customer change line is not a valid change, or NULL when it is valid (reads
    the columns of ``field_value_stages(..., CUSTOMER_FIELDS)``)."""
    return record_reason(raw, doc, CUSTOMER_FIELDS)
