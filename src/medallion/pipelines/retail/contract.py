"""Retail's input contracts: what an event and a customer change are (medallion/contracts.py
holds the rules every contract is made of)."""

from __future__ import annotations

from medallion.contract_rules import Contract
from medallion.contracts import OPERATIONS, Check, FieldRule, field_missing, field_text

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
    FieldRule("operation", "string", True, OPERATIONS, strict=True),
    FieldRule("sequence_num", "integer", True),
    FieldRule("updated_at", "timestamp", True),
)

# What an event is (the rules read the columns of ``field_value_stages(..., EVENT_FIELDS)``).
EVENTS = Contract(
    "events",
    EVENT_FIELDS,
    (
        Check(
            "purchase_has_revenue",
            lambda: (
                (field_text("event_type") == "purchase") & field_missing("revenue"),
                "purchase without revenue",
            ),
        ),
    ),
)
# What a customer change is.
CUSTOMER_CHANGES = Contract("customers", CUSTOMER_FIELDS)
