"""The queries the exploration notebook runs are those docs/retail.md shows."""

from __future__ import annotations

from pathlib import Path

from medallion.config import Config
from medallion.pipelines.retail.queries import customer_at_purchase

DOCS = Path(__file__).resolve().parents[2] / "docs" / "retail.md"


def test_the_customer_at_purchase_query_is_the_documented_one_on_the_lakes_tables():
    config = Config(landing="/l", lake="/l", catalog="main")
    query = customer_at_purchase(config)
    assert "FROM `main`.`medallion`.`silver_events` AS e" in query
    assert "LEFT JOIN `main`.`medallion`.`silver_customers_history` AS h" in query
    by_flat_names = query.replace("`main`.`medallion`.`silver_events`", "silver_events").replace(
        "`main`.`medallion`.`silver_customers_history`", "silver_customers_history"
    )
    assert f"```sql\n{by_flat_names}\n```" in DOCS.read_text()
    local = customer_at_purchase(Config(landing="/l", lake="/data/lake"))
    assert "FROM delta.`/data/lake/silver/events` AS e" in local
