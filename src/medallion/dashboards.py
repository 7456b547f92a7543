"""The dashboard's views, defined once: the same SQL feeds the Lakeview dashboard of the bundle
(``dashboards/medallion.lvdash.json``, generated from :data:`VIEWS`) and the local page of
``medallion dashboard`` (medallion/ops/dashboard.py), which runs it with DuckDB over the lake's
Delta tables read by delta-rs: no JVM.

The queries name tables without catalog or schema (``gold_daily_revenue_by_country``, the
table's ``flat_name``): on Databricks the dashboard resource sets both per target
(``dataset_catalog``/``dataset_schema``), locally each name is a view of that table of the lake. They keep to SQL that
Databricks SQL and DuckDB read alike.

Regenerate the Lakeview file after changing a view::

    python -m medallion.dashboards > dashboards/medallion.lvdash.json
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any


@dataclass(frozen=True)
class View:
    """One chart: a query, and which of its columns go on x, on y, and to colour (series)."""

    name: str
    title: str
    sql: str
    tables: tuple[str, ...]
    kind: str  # line or bar: Plotly's and Lakeview's name alike
    x: str
    y: str
    color: str | None = None
    x_type: str = "categorical"  # temporal, categorical or quantitative


VIEWS: tuple[View, ...] = (
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
    View(
        name="stream_health",
        title="Stream health: rows per second, per stream and minute",
        sql=(
            "SELECT query_name AS stream, date_trunc('minute', timestamp) AS minute,\n"
            "  SUM(num_input_rows) AS input_rows,\n"
            "  AVG(processed_rows_per_second) AS rows_per_second\n"
            "FROM system_stream_progress WHERE num_input_rows > 0\n"
            "GROUP BY query_name, date_trunc('minute', timestamp)\n"
            "ORDER BY minute, stream"
        ),
        tables=("_system/stream_progress",),
        kind="line",
        x="minute",
        y="rows_per_second",
        color="stream",
        x_type="temporal",
    ),
)


# --- Lakeview (AI/BI) dashboard ---------------------------------------------------------------


def _widget(view: View, position: dict[str, int]) -> dict[str, Any]:
    columns = [c for c in (view.x, view.y, view.color) if c]
    encodings: dict[str, Any] = {
        "x": {"fieldName": view.x, "displayName": view.x, "scale": {"type": view.x_type}},
        "y": {"fieldName": view.y, "displayName": view.y, "scale": {"type": "quantitative"}},
    }
    if view.color:
        encodings["color"] = {
            "fieldName": view.color,
            "displayName": view.color,
            "scale": {"type": "categorical"},
        }
    return {
        "widget": {
            "name": view.name,
            "queries": [
                {
                    "name": "main_query",
                    "query": {
                        "datasetName": view.name,
                        "fields": [{"name": c, "expression": f"`{c}`"} for c in columns],
                        "disaggregated": True,
                    },
                }
            ],
            "spec": {
                "version": 3,
                "widgetType": view.kind,
                "encodings": encodings,
                "frame": {"showTitle": True, "title": view.title},
            },
        },
        "position": position,
    }


def lakeview(views: tuple[View, ...] = VIEWS) -> dict[str, Any]:
    """The ``.lvdash.json`` document of ``views``: a dataset per view, two charts a row."""
    title = {
        "widget": {"name": "title", "textbox_spec": "# medallion\nGold, quarantine, streams"},
        "position": {"x": 0, "y": 0, "width": 6, "height": 1},
    }
    charts = [
        _widget(view, {"x": 3 * (i % 2), "y": 1 + 6 * (i // 2), "width": 3, "height": 6})
        for i, view in enumerate(views)
    ]
    return {
        "datasets": [
            {"name": v.name, "displayName": v.title, "queryLines": _lines(v.sql)} for v in views
        ],
        "pages": [{"name": "overview", "displayName": "Overview", "layout": [title, *charts]}],
    }


def _lines(sql: str) -> list[str]:
    lines = sql.split("\n")
    return [line + "\n" for line in lines[:-1]] + [lines[-1]]


# --- the same views over a local lake ----------------------------------------------------------


def _plain(value: object) -> object:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return value


def query_views(lake: str, views: tuple[View, ...] = VIEWS) -> dict[str, list[dict[str, Any]]]:
    """Each view's rows over the Delta tables under ``lake``, read with delta-rs and queried
    with DuckDB. A view whose tables are not all there yet has no rows."""
    import duckdb
    from deltalake import DeltaTable

    from medallion.config import Config
    from medallion.streams.progress import lake_table

    config = Config(landing=lake, lake=lake)
    connection = duckdb.connect()
    loaded: dict[str, bool] = {}
    results: dict[str, list[dict[str, Any]]] = {}
    for view in views:
        for key in view.tables:
            if key not in loaded:
                table = lake_table(config, key)
                loaded[key] = os.path.isdir(os.path.join(table.path, "_delta_log"))
                if loaded[key]:
                    arrow = DeltaTable(table.path).to_pyarrow_table()
                    connection.register(table.flat_name, arrow)
        if not all(loaded[key] for key in view.tables):
            results[view.name] = []
            continue
        cursor = connection.execute(view.sql)
        columns = [d[0] for d in cursor.description]
        results[view.name] = [
            {c: _plain(v) for c, v in zip(columns, row, strict=True)} for row in cursor.fetchall()
        ]
    connection.close()
    return results


if __name__ == "__main__":
    print(json.dumps(lakeview(), indent=2))
