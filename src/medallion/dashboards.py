"""The dashboards' views, declared once per pipeline (``Pipeline.views``): the same SQL feeds
the pipeline's Lakeview dashboard in the bundle (``dashboard.lvdash.json`` in the pipeline's
folder, generated from the declarations) and its page of ``medallion dashboard``
(medallion/ops/dashboard.py), which runs it with DuckDB over the lake's Delta tables read by
delta-rs: no JVM. Every pipeline's dashboard ends with its streams' health, from medallion's
progress table.

The queries name tables without catalog or schema (``gold_fraud_alerts``, the table's
``flat_name``): on Databricks each dashboard resource sets both per target
(``dataset_catalog``/``dataset_schema``), locally each name is a view of that table of the
lake. They keep to SQL that Databricks SQL and DuckDB read alike. Every pipeline's dashboard
also shows its expectations' failure rates, from the data-quality log.

Regenerate the Lakeview files after changing a view::

    python -m medallion.dashboards
"""

from __future__ import annotations

import json
import os
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from medallion.config import Config
from medallion.declarations import Pipeline, View
from medallion.pipelines import pipeline_folder, pipelines
from medallion.sql_names import TableRef


def stream_health(pipeline: Pipeline) -> View:
    """Rows per second of each of the pipeline's streams, per minute, from the progress table."""
    names = ", ".join(f"'{flow.name}'" for flow in pipeline.flows)
    return View(
        name="stream_health",
        title="Stream health: rows per second, per stream and minute",
        sql=(
            "SELECT query_name AS stream, date_trunc('minute', timestamp) AS minute,\n"
            "  SUM(num_input_rows) AS input_rows,\n"
            "  AVG(processed_rows_per_second) AS rows_per_second\n"
            "FROM system_stream_progress\n"
            f"WHERE num_input_rows > 0 AND query_name IN ({names})\n"
            "GROUP BY query_name, date_trunc('minute', timestamp)\n"
            "ORDER BY minute, stream"
        ),
        tables=("_system/stream_progress",),
        kind="line",
        x="minute",
        y="rows_per_second",
        color="stream",
        x_type="temporal",
    )


def data_quality(pipeline: Pipeline) -> View:
    """The failure rate of each expectation of the pipeline's contracts that records broke,
    per hour, from the data-quality log."""
    datasets = ", ".join(f"'{contract.dataset}'" for contract in pipeline.contracts)
    return View(
        name="data_quality",
        title="Data quality: share of rows that broke each expectation, per hour",
        sql=(
            "SELECT concat(dataset, '.', rule) AS expectation,\n"
            "  date_trunc('hour', recorded_at) AS hour,\n"
            "  CAST(SUM(failed) AS DOUBLE) / SUM(passed + failed) AS failure_rate\n"
            "FROM system_data_quality\n"
            f"WHERE dataset IN ({datasets})\n"
            "GROUP BY dataset, rule, date_trunc('hour', recorded_at)\n"
            "HAVING SUM(failed) > 0\n"
            "ORDER BY hour, expectation"
        ),
        tables=("_system/data_quality",),
        kind="line",
        x="hour",
        y="failure_rate",
        color="expectation",
        x_type="temporal",
    )


def dashboard_views(pipeline: Pipeline) -> tuple[View, ...]:
    """A pipeline's dashboard: its declared views, its expectations' failure rates (when it
    declares contracts), then its streams' health."""
    quality = (data_quality(pipeline),) if pipeline.contracts else ()
    return (*pipeline.views, *quality, stream_health(pipeline))


def dashboard_pipelines() -> list[Pipeline]:
    """The registered pipelines that declare views, each with a dashboard of its own."""
    return [p for p in pipelines() if p.views]


# --- Lakeview (AI/BI) dashboard ---------------------------------------------------------------


def _query(view: View, fields: list[dict[str, str]], name: str = "main_query") -> dict:
    return {
        "name": name,
        "query": {
            "datasetName": view.name,
            "fields": fields,
            "disaggregated": name == "main_query",
        },
    }


def _field(column: str) -> dict[str, str]:
    return {"name": column, "expression": f"`{column}`"}


def _widget(view: View, position: dict[str, int]) -> dict[str, Any]:
    """A chart (``line``, ``bar``) or a ``table`` of one view."""
    if view.kind == "table":
        columns = list(view.columns)
        spec: dict[str, Any] = {
            "version": 1,
            "widgetType": "table",
            "encodings": {"columns": [{"fieldName": c, "displayName": c} for c in columns]},
        }
    else:
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
        spec = {"version": 3, "widgetType": view.kind, "encodings": encodings}
    spec["frame"] = {"showTitle": True, "title": view.title}
    queries = [_query(view, [_field(c) for c in columns])]
    return {"widget": {"name": view.name, "queries": queries, "spec": spec}, "position": position}


def _chooser(view: View, position: dict[str, int]) -> dict[str, Any]:
    """A single-select filter on ``view.choose``: it narrows every widget of the view's dataset."""
    assert view.choose is not None
    column, name = view.choose, f"{view.name}_{view.choose}"
    fields = [
        _field(column),
        {
            "name": f"{column}_associativity",
            "expression": "COUNT_IF(`associative_filter_predicate_group`)",
        },
    ]
    encodings = {"fields": [{"fieldName": column, "displayName": column, "queryName": name}]}
    spec = {
        "version": 2,
        "widgetType": "filter-single-select",
        "encodings": encodings,
        "frame": {"showTitle": True, "title": column},
    }
    widget = {"name": f"choose_{name}", "queries": [_query(view, fields, name)], "spec": spec}
    return {"widget": widget, "position": position}


def lakeview(pipeline: Pipeline) -> dict[str, Any]:
    """The ``.lvdash.json`` document of a pipeline's dashboard: a dataset per view, two
    widgets a row, a filter above a view that lets the reader choose."""
    views = dashboard_views(pipeline)
    heading = f"# {pipeline.title or pipeline.name}\nmedallion's {pipeline.name} pipeline"
    layout: list[dict[str, Any]] = [
        {
            "widget": {"name": "title", "textbox_spec": heading},
            "position": {"x": 0, "y": 0, "width": 6, "height": 1},
        }
    ]
    y = 1
    for i, view in enumerate(views):
        x = 3 * (i % 2)
        if view.choose:
            layout.append(_chooser(view, {"x": x, "y": y, "width": 3, "height": 1}))
        layout.append(_widget(view, {"x": x, "y": y + 1, "width": 3, "height": 6}))
        y += 7 * (i % 2)
    return {
        "datasets": [
            {"name": v.name, "displayName": v.title, "queryLines": _lines(v.sql)} for v in views
        ],
        "pages": [
            {
                "name": pipeline.name,
                "displayName": pipeline.title or pipeline.name,
                "layout": layout,
            }
        ],
    }


DASHBOARD_FILE = "dashboard.lvdash.json"


def lakeview_files() -> dict[Path, dict[str, Any]]:
    """Each dashboard's file, ``dashboard.lvdash.json`` in its pipeline's folder (beside the
    ``dashboard.yml`` that deploys it), and its document; pipelines declared outside a
    folder of their own have none."""
    files = {}
    for pipeline in dashboard_pipelines():
        folder = pipeline_folder(pipeline.name)
        if folder is not None:
            files[folder / DASHBOARD_FILE] = lakeview(pipeline)
    return files


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


def query_views(lake: str, views: tuple[View, ...]) -> dict[str, list[dict[str, Any]]]:
    """Each view's rows over the Delta tables under ``lake``, read with delta-rs and queried
    with DuckDB. A view whose tables are not all there yet has no rows."""
    # deferred: loads duckdb
    import duckdb
    from deltalake import DeltaTable

    connection = duckdb.connect()
    loaded: dict[str, bool] = {}
    results: dict[str, list[dict[str, Any]]] = {}
    for view in views:
        for key in view.tables:
            if key not in loaded:
                table = _lake_table(lake, key)
                loaded[key] = _exists(table)
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


def _lake_table(lake: str, key: str) -> TableRef:
    """The table of ``key`` (a declared table or the progress table) in the lake at ``lake``."""
    # deferred: loads pyspark
    from medallion.streams.progress import lake_table

    return lake_table(Config(landing=lake, lake=lake), key)


def _exists(table: TableRef) -> bool:
    """True when the table's folder holds a Delta log (read from the folder: no Spark)."""
    return os.path.isdir(os.path.join(str(table.path), "_delta_log"))


def pipelines_in_lake(lake: str) -> list[Pipeline]:
    """The pipelines with a dashboard that have at least one table in ``lake``."""
    return [
        p for p in dashboard_pipelines() if any(_exists(_lake_table(lake, t.key)) for t in p.tables)
    ]


def write_lakeview_files() -> list[Path]:
    """Write every dashboard's ``.lvdash.json`` beside its pipeline; the paths written."""
    written = []
    for path, document in lakeview_files().items():
        path.write_text(json.dumps(document, indent=2) + "\n")
        written.append(path)
    return written


if __name__ == "__main__":
    for written in write_lakeview_files():
        print(written)
