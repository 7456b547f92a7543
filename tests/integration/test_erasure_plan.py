"""What an erasure of a data subject would touch (issue 29, erasure, its first read-only step):
every table's rows of the subject and every recomputed gold aggregate's scope, counted on the
shared reference lake and checked against the landed lines and the plain-Python oracle."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from oracle import expected_customers, expected_from, read_lines
from subject_oracle import BANKING_FIELDS, RETAIL_FIELDS, holds_subject

from medallion.config import Config
from medallion.ops.erasure_plan import erasure_plan

pytestmark = pytest.mark.slow  # it builds the shared reference lake when it is the first


def _lines_holding(landing, dataset: str, subject: str) -> int:
    fields = BANKING_FIELDS if dataset in ("transactions", "accounts") else RETAIL_FIELDS
    return sum(holds_subject(line, fields, subject) for _, line in read_lines(landing / dataset))


def test_the_plan_counts_every_tables_rows_of_a_shopper_and_of_an_account(spark, reference_lake):
    landing = reference_lake / "landing"
    config = Config(landing=str(landing), lake=str(reference_lake / "lake"))
    events, customers = expected_from(landing), expected_customers(landing)
    # The shopper with the most purchases among those who are known customers.
    purchases = Counter(
        e["user_id"] for e in events.silver.values() if e["event_type"] == "purchase"
    )
    shopper = max(
        (user for user in purchases if user in customers.state), key=lambda u: (purchases[u], u)
    )
    theirs = [e for e in events.silver.values() if e["user_id"] == shopper]

    plan = {(p.pipeline, p.table): p for p in erasure_plan(spark, config, shopper)}
    retail = {table: p for (pipeline, table), p in plan.items() if pipeline == "retail"}
    assert retail["bronze/events"].rows == _lines_holding(landing, "events", shopper) > 0
    assert retail["bronze/customers"].rows == _lines_holding(landing, "customers", shopper) > 0
    assert retail["silver/events"].rows == len(theirs)
    assert retail["silver/customers"].rows == 1
    hours = {e["event_timestamp"].replace(minute=0, second=0, microsecond=0) for e in theirs}
    hourly = retail["gold/hourly_product_metrics"]
    assert {h.replace(tzinfo=None) for h in hours} == set(hourly.scope)
    assert hourly.rows == sum(1 for hour, _ in events.gold if hour in hours)
    days = {e["event_timestamp"].date() for e in theirs if e["event_type"] == "purchase"}
    assert set(retail["gold/daily_revenue_by_country"].scope) == days
    # The ledger of counted purchases holds the shopper's own: deleted, not recomputed.
    ledger = retail["gold/revenue_purchases"]
    assert (ledger.rows, ledger.scope) == (sum(e["event_type"] == "purchase" for e in theirs), ())
    assert retail["gold/hourly_product_users"].rows == len(
        {
            (e["event_timestamp"].replace(minute=0, second=0, microsecond=0), e["product_id"])
            for e in theirs
        }
    )
    assert "iot" not in {pipeline for pipeline, _ in plan}  # device readings name nobody

    # An account: banking's tables, each by its account_id or its raw lines.
    account = json.loads(read_lines(landing / "transactions")[0][1])["account_id"]
    banking = {p.table: p for p in erasure_plan(spark, config, account) if p.pipeline == "banking"}
    assert banking["bronze/transactions"].rows == _lines_holding(landing, "transactions", account)
    assert banking["bronze/accounts"].rows == _lines_holding(landing, "accounts", account)
    assert all(not p.scope for p in banking.values())
    assert banking["silver/transactions"].rows > 0
