"""The retail dashboard: gold's metrics per hour, revenue by country, quarantine reasons."""

from __future__ import annotations

from medallion.declarations import View

VIEWS = (
    View(
        name="gold_metrics",
        title="Gold: views, carts and purchases per hour",
        sql=(
            "SELECT window_start AS hour, 'views' AS metric, SUM(views) AS value\n"
            "FROM gold_hourly_product_metrics GROUP BY window_start\n"
            "UNION ALL\n"
            "SELECT window_start AS hour, 'add_to_carts' AS metric, SUM(add_to_carts) AS value\n"
            "FROM gold_hourly_product_metrics GROUP BY window_start\n"
            "UNION ALL\n"
            "SELECT window_start AS hour, 'purchases' AS metric, SUM(purchases) AS value\n"
            "FROM gold_hourly_product_metrics GROUP BY window_start\n"
            "ORDER BY hour, metric"
        ),
        tables=("gold/hourly_product_metrics",),
        kind="line",
        x="hour",
        y="value",
        color="metric",
        x_type="temporal",
    ),
    View(
        name="revenue_by_country",
        title="Revenue by country",
        sql=(
            "SELECT country, SUM(revenue) AS revenue, SUM(purchases) AS purchases\n"
            "FROM gold_daily_revenue_by_country GROUP BY country\n"
            "ORDER BY revenue DESC, country"
        ),
        tables=("gold/daily_revenue_by_country",),
        kind="bar",
        x="country",
        y="revenue",
    ),
    View(
        name="quarantine_reasons",
        title="Quarantined records by reason",
        sql=(
            "SELECT reason, COUNT(*) AS records FROM (\n"
            "  SELECT reason FROM silver_events_quarantine\n"
            "  UNION ALL\n"
            "  SELECT reason FROM silver_customers_quarantine\n"
            ") GROUP BY reason\n"
            "ORDER BY records DESC, reason"
        ),
        tables=("silver/events_quarantine", "silver/customers_quarantine"),
        kind="bar",
        x="reason",
        y="records",
    ),
)
