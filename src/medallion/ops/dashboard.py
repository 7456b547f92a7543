"""``medallion dashboard``: the dashboard's views of a local lake as a live page on 127.0.0.1.

Dash (Plotly) serves one chart per view of medallion/dashboards.py and queries the lake again
every ``refresh`` seconds, so the page follows a ``medallion run --stream`` as it writes. The
lake is read with delta-rs and DuckDB: no JVM, and a run can hold the lake meanwhile.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from typing import Any

from medallion.config import ConfigError
from medallion.dashboards import VIEWS, View, query_views

MISSING = "the dashboard needs Dash and DuckDB: pip install 'medallion[dashboard]'"


def figure(view: View, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A Plotly figure (as a dict) of one view's rows: a trace per colour, else one trace.

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


def build_app(lake: str, refresh_seconds: float):
    """The Dash app of ``lake``'s dashboard."""
    try:
        from dash import Dash, Input, Output, dcc, html
    except ImportError:
        raise ConfigError(MISSING) from None

    app = Dash(__name__, title="medallion dashboard", update_title=None)
    app.layout = html.Div(
        [
            html.H1("medallion"),
            html.P(id="updated", children=f"lake {lake}"),
            dcc.Interval(id="refresh", interval=int(refresh_seconds * 1000)),
            *(html.Section([html.H2(view.title), dcc.Graph(id=view.name)]) for view in VIEWS),
        ],
        style={"fontFamily": "sans-serif", "maxWidth": "1100px", "margin": "auto"},
    )

    @app.callback(
        [Output(view.name, "figure") for view in VIEWS] + [Output("updated", "children")],
        Input("refresh", "n_intervals"),
    )
    def refresh(_: int | None) -> list:
        rows = query_views(lake)
        stamp = time.strftime("%H:%M:%S")
        return [figure(view, rows[view.name]) for view in VIEWS] + [f"lake {lake}, read {stamp}"]

    return app


def serve(lake: str, port: int, refresh_seconds: float) -> None:
    """Serve the dashboard on 127.0.0.1:``port`` until Ctrl-C, with one line on the console."""
    try:
        import flask.cli
    except ImportError:
        raise ConfigError(MISSING) from None

    app = build_app(lake, refresh_seconds)
    flask.cli.show_server_banner = lambda *_args: None  # the line below says it all
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    print(f"medallion dashboard: http://127.0.0.1:{port}/ (reads {lake}; Ctrl-C stops it)")
    app.run(host="127.0.0.1", port=port, debug=False)
