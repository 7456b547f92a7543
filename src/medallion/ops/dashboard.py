"""``medallion dashboard``: each pipeline's dashboard over a local lake, a live page on
127.0.0.1 with a tab per pipeline that has tables in the lake.

Dash (Plotly) serves the views each pipeline declares (medallion/dashboards.py): a chart or a
table per view, a list to choose from above a view that lets the reader choose (a device),
and queries the lake again every ``refresh`` seconds, so the page follows a
``medallion run --stream`` as it writes. The lake is read with delta-rs and DuckDB: no JVM,
and a run can hold the lake meanwhile.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from typing import Any

from medallion.dashboards import dashboard_views, pipelines_in_lake, query_views
from medallion.declarations import Pipeline, View
from medallion.errors import ConfigError

MISSING = "the dashboard needs Dash and DuckDB: pip install 'medallion[dashboard]'"


def element_id(pipeline: Pipeline, view: View, part: str = "") -> str:
    """The page element of one view of one pipeline (views of two pipelines may share names).

    >>> from medallion.pipelines import pipelines
    >>> (iot,) = pipelines(["iot"])
    >>> element_id(iot, iot.views[1], "choose")
    'iot-device_minutes-choose'
    """
    return "-".join(filter(None, (pipeline.name, view.name, part)))


def figure(view: View, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A Plotly figure (as a dict) of one chart view's rows: a trace per colour, else one trace.

    >>> from medallion.pipelines.retail.views import VIEWS
    >>> figure(VIEWS[1], [{"country": "DE", "revenue": 12.5, "purchases": 2}])["data"]
    [{'type': 'bar', 'name': 'revenue', 'x': ['DE'], 'y': [12.5]}]
    """
    series: dict[str, tuple[list, list]] = defaultdict(lambda: ([], []))
    for row in rows:
        xs, ys = series[str(row[view.color]) if view.color else view.y]
        xs.append(row[view.x])
        ys.append(row[view.y])
    trace = {"line": {"type": "scatter", "mode": "lines+markers"}, "bar": {"type": "bar"}}
    layout: dict[str, Any] = {
        "xaxis": {"title": {"text": view.x}},
        "yaxis": {"title": {"text": view.y}},
        "margin": {"t": 20},
    }
    if not rows:
        layout["annotations"] = [{"text": "no data yet", "showarrow": False}]
    return {
        "data": [
            {**trace[view.kind], "name": name, "x": xs, "y": ys}
            for name, (xs, ys) in series.items()
        ],
        "layout": layout,
    }


def chosen_rows(view: View, rows: list[dict[str, Any]], choice: object) -> list[dict[str, Any]]:
    """The rows of the value chosen for ``view.choose`` (all rows for a view without one).

    >>> from medallion.pipelines.iot.views import VIEWS
    >>> rows = [{"device_id": "d1", "value": 1.0}, {"device_id": "d2", "value": 2.0}]
    >>> chosen_rows(VIEWS[1], rows, "d2"), choices(VIEWS[1], rows)
    ([{'device_id': 'd2', 'value': 2.0}], ['d1', 'd2'])
    """
    if view.choose is None:
        return rows
    return [row for row in rows if row[view.choose] == choice]


def choices(view: View, rows: list[dict[str, Any]]) -> list:
    """The values a reader may choose, in order."""
    return sorted({row[view.choose] for row in rows}) if view.choose else []


def build_app(lake: str, refresh_seconds: float):
    """The Dash app of ``lake``'s dashboards: a tab per pipeline present in the lake."""
    try:
        # deferred: loads dash, IPython
        from dash import Dash, Input, Output, dcc, html
    except ImportError:
        raise ConfigError(MISSING) from None

    present = pipelines_in_lake(lake)

    def section(pipeline: Pipeline, view: View):
        parts: list[Any] = [html.H2(view.title)]
        if view.choose:
            parts.append(dcc.Dropdown(id=element_id(pipeline, view, "choose"), clearable=False))
        if view.kind == "table":
            parts.append(html.Table(id=element_id(pipeline, view), className="view-table"))
        else:
            parts.append(dcc.Graph(id=element_id(pipeline, view)))
        return html.Section(parts)

    tabs = [
        dcc.Tab(
            label=pipeline.title or pipeline.name,
            value=pipeline.name,
            id=f"tab-{pipeline.name}",
            children=[section(pipeline, view) for view in dashboard_views(pipeline)],
        )
        for pipeline in present
    ]
    app = Dash(__name__, title="medallion dashboard", update_title=None)
    app.layout = html.Div(
        [
            html.H1("medallion"),
            html.P(id="updated", children=f"lake {lake}"),
            dcc.Interval(id="refresh", interval=int(refresh_seconds * 1000)),
            dcc.Tabs(id="pipelines", value=present[0].name, children=tabs)
            if present
            else html.P("no pipeline has tables in this lake yet"),
        ],
        style={"fontFamily": "sans-serif", "maxWidth": "1100px", "margin": "auto"},
    )
    for pipeline in present:
        _register(app, pipeline, lake)

    @app.callback(Output("updated", "children"), Input("refresh", "n_intervals"))
    def stamp(_: int | None) -> str:
        return f"lake {lake}, read {time.strftime('%H:%M:%S')}"

    return app


def _register(app, pipeline: Pipeline, lake: str) -> None:
    """The callback that draws one pipeline's tab from the lake on every refresh, and again
    when the reader chooses another value."""
    # deferred: loads dash, IPython
    from dash import Input, Output

    views = dashboard_views(pipeline)
    choosers = [v for v in views if v.choose]
    outputs = []
    for view in views:
        outputs.append(
            Output(element_id(pipeline, view), "children" if view.kind == "table" else "figure")
        )
    for view in choosers:
        outputs.append(Output(element_id(pipeline, view, "choose"), "options"))
        outputs.append(Output(element_id(pipeline, view, "choose"), "value"))
    inputs = [Input("refresh", "n_intervals")]
    inputs += [Input(element_id(pipeline, v, "choose"), "value") for v in choosers]

    @app.callback(outputs, inputs)
    def draw(_refresh: int | None, *chosen: object) -> list:
        rows = query_views(lake, views)
        picked = dict(zip([v.name for v in choosers], chosen, strict=True))
        drawn: list[Any] = []
        options: list[Any] = []
        for view in choosers:
            values = choices(view, rows[view.name])
            if picked[view.name] not in values:
                picked[view.name] = values[0] if values else None
            options += [values, picked[view.name]]
        for view in views:
            shown = chosen_rows(view, rows[view.name], picked.get(view.name))
            drawn.append(_table(view, shown) if view.kind == "table" else figure(view, shown))
        return drawn + options


def _table(view: View, rows: list[dict[str, Any]]) -> list:
    """The rows of a table view as the children of an HTML table: a header, then a row each."""
    # deferred: loads dash, IPython
    from dash import html

    header = html.Tr([html.Th(column) for column in view.columns])
    body = [html.Tr([html.Td(str(row[c])) for c in view.columns]) for row in rows]
    return [html.Thead(header), html.Tbody(body)]


def serve(lake: str, port: int, refresh_seconds: float) -> None:
    """Serve the dashboard on 127.0.0.1:``port`` until Ctrl-C, with one line on the console."""
    try:
        # deferred: loads flask
        import flask.cli
    except ImportError:
        raise ConfigError(MISSING) from None

    app = build_app(lake, refresh_seconds)
    flask.cli.show_server_banner = lambda *_args: None  # the line below says it all
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    print(f"medallion dashboard: http://127.0.0.1:{port}/ (reads {lake}; Ctrl-C stops it)")
    app.run(host="127.0.0.1", port=port, debug=False)
