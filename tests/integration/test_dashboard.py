"""The dashboards: each pipeline's views, for Lakeview and for ``medallion dashboard``.

Each view's SQL gives the same rows in Spark SQL (the dialect of Databricks SQL) as in DuckDB
over delta-rs (the local page). The local page, opened in headless Chromium, has a tab per
pipeline; each draws its charts and tables with the lake's numbers, computed here with Spark,
the IoT tab for the device chosen, and the page follows the lake as a new delivery lands.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest
from lake_copy import copy_lake
from processes import MEDALLION, wait_until
from pyspark.sql import functions as F
from spark_cluster import free_port

from medallion.config import Config
from medallion.dashboards import dashboard_pipelines, dashboard_views, query_views
from medallion.pipelines.retail.generator import generate
from medallion.streams.progress import lake_table
from medallion.streams.runner import run_available_now
from medallion.tables import read_table

pytestmark = pytest.mark.slow  # left out of make test-fast (docs/testing.md)

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


@pytest.fixture(scope="module")
def lake(reference_lake, tmp_path_factory):
    """A copy of the reference lake, every pipeline in it (the browser test lands a delivery)."""
    landing, lake = copy_lake(reference_lake, tmp_path_factory.mktemp("dashboard"))
    return Config(landing=str(landing), lake=str(lake))


def _rounded(rows):
    def plain(value):
        if isinstance(value, (float, Decimal)):
            return round(float(value), 4)
        if hasattr(value, "isoformat"):
            value = value.isoformat()
        return value.removesuffix("+00:00") if isinstance(value, str) else value

    return [tuple(plain(v) for v in row) for row in rows]


def test_every_view_of_every_dashboard_gives_the_same_rows_in_spark_as_locally(spark, lake):
    """The Lakeview files are checked against the views offline (tests/bundle); here each view
    runs in Spark SQL and in DuckDB over delta-rs, on a lake of every pipeline."""
    for pipeline in dashboard_pipelines():
        views = dashboard_views(pipeline)
        local = query_views(lake.lake, views)
        for view in views:
            for key in view.tables:
                table = lake_table(lake, key)
                read_table(spark, table).createOrReplaceTempView(table.flat_name)
            in_spark = spark.sql(view.sql).collect()
            assert in_spark, (pipeline.name, view.name)
            columns = list(local[view.name][0])
            assert _rounded(in_spark) == _rounded(
                [[r[c] for c in columns] for r in local[view.name]]
            ), (pipeline.name, view.name)


def _browser():
    from selenium import webdriver

    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    assert not missing, f"{missing} missing: `make test` installs Debian's chromium"
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1200,2400",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=webdriver.ChromeService(str(CHROMEDRIVER)))


def _chart(browser, element: str) -> list[dict] | None:
    """The traces Plotly drew for one chart: their names, x and y."""
    return browser.execute_script(
        "const plot = document.querySelector(`#${arguments[0]} .js-plotly-plot`);"
        "return plot && plot.data ? plot.data.map(t => ({name: t.name, x: t.x, y: t.y})) : null;",
        element,
    )


def _table(browser, element: str) -> list[list[str]] | None:
    """The cells of a table view, row by row (the header first); None until it is drawn."""
    return browser.execute_script(
        "const table = document.getElementById(arguments[0]);"
        "if (!table || !table.rows.length) return null;"
        "return Array.from(table.rows).map(r => Array.from(r.cells).map(c => c.textContent));",
        element,
    )


def _open_tab(browser, pipeline) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.wait import WebDriverWait

    # Dash draws the page in the browser after it loads, so the tab comes a moment later.
    label = pipeline.title or pipeline.name
    tab = (By.XPATH, f"//*[normalize-space(text())='{label}']")
    WebDriverWait(browser, 60).until(expected_conditions.element_to_be_clickable(tab)).click()
    views = dashboard_views(pipeline)

    def drawn() -> bool:
        return all(
            (_table if v.kind == "table" else _chart)(browser, f"{pipeline.name}-{v.name}")
            for v in views
        )

    assert wait_until(drawn, 60, 0.5), pipeline.name


def _revenue_by_country(spark, config) -> dict[str, float]:
    gold = read_table(spark, config.table("gold/daily_revenue_by_country"))
    totals = gold.groupBy("country").agg(F.sum("revenue").alias("revenue")).collect()
    return {r.country: float(r.revenue) for r in totals}


def _check_retail(browser, spark, lake) -> dict[str, float]:
    (revenue,) = _chart(browser, "retail-revenue_by_country")
    expected = _revenue_by_country(spark, lake)
    assert dict(zip(revenue["x"], revenue["y"], strict=True)) == pytest.approx(expected)

    reasons: Counter = Counter()
    for key in ("silver/events_quarantine", "silver/customers_quarantine"):
        for row in read_table(spark, lake.table(key)).collect():
            reasons[row.reason] += 1
    (drawn,) = _chart(browser, "retail-quarantine_reasons")
    assert dict(zip(drawn["x"], drawn["y"], strict=True)) == dict(reasons)

    metrics = {t["name"]: sum(t["y"]) for t in _chart(browser, "retail-gold_metrics")}
    gold = read_table(spark, lake.table("gold/hourly_product_metrics"))
    sums = gold.agg(*(F.sum(c).alias(c) for c in ("views", "add_to_carts", "purchases")))
    assert metrics == sums.first().asDict()
    return expected


def _check_banking(browser, spark, lake) -> None:
    alerts = read_table(spark, lake.table("gold/fraud_alerts")).collect()
    header, *rows = _table(browser, "banking-alert_queue")
    assert header == ["transaction_timestamp", "transaction_id", "account_id", "amount", "reasons"]
    newest = sorted(alerts, key=lambda a: (-a.transaction_timestamp.timestamp(), a.transaction_id))
    assert len(rows) == min(len(alerts), 500) > 0
    assert [r[1] for r in rows] == [a.transaction_id for a in newest[:500]]
    assert rows[0][4] == ", ".join(newest[0].alert_reasons)

    per_reason: Counter = Counter(reason for a in alerts for reason in a.alert_reasons)
    traces = _chart(browser, "banking-alerts_by_reason")
    assert {t["name"]: sum(t["y"]) for t in traces} == dict(per_reason)

    activity = read_table(spark, lake.table("gold/account_daily_activity"))
    shares = activity.groupBy("account_id").agg(
        (F.sum("flagged_transactions") / F.sum("transactions")).alias("share")
    )
    expected = {r.account_id: r.share for r in shares.collect()}
    (drawn,) = _chart(browser, "banking-flagged_share")
    assert len(drawn["x"]) == min(20, len(expected))
    assert drawn["y"] == sorted(drawn["y"], reverse=True)
    assert max(drawn["y"]) == pytest.approx(max(expected.values()))
    for account, share in zip(drawn["x"], drawn["y"], strict=True):
        assert share == pytest.approx(expected[account])


def _check_iot(browser, spark, lake) -> None:
    status = read_table(spark, lake.table("gold/device_status")).orderBy("device_id").collect()
    header, *rows = _table(browser, "iot-device_status")
    assert header == ["device_id", "status", "last_seen", "temperature", "humidity"]
    assert [(r[0], r[1]) for r in rows] == [(s.device_id, s.status) for s in status]

    minutes = read_table(spark, lake.table("gold/device_minute_metrics"))

    def averages(device: str) -> dict[str, float]:
        rows = minutes.where(F.col("device_id") == device).collect()
        return {
            "temperature_avg": sum(r.temperature_avg for r in rows),
            "humidity_avg": sum(r.humidity_avg for r in rows),
        }

    def drawn_for(device: str) -> bool:
        traces = _chart(browser, "iot-device_minutes") or []
        sums = {t["name"]: sum(t["y"]) for t in traces}
        return sums == pytest.approx(averages(device))

    devices = [s.device_id for s in status]
    assert wait_until(lambda: drawn_for(devices[0]), 30, 0.5)  # the first device, by default


def test_each_pipelines_page_draws_its_views_with_the_lakes_numbers_and_follows_the_lake(
    spark, lake
):
    port = free_port()
    server = subprocess.Popen(
        [MEDALLION, "dashboard", "--lake", lake.lake, "--port", str(port), "--refresh", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    browser = None
    pipelines = {p.name: p for p in dashboard_pipelines()}
    try:
        assert server.stdout.readline().startswith(f"medallion dashboard: http://127.0.0.1:{port}/")
        browser = _browser()
        browser.get(f"http://127.0.0.1:{port}/")
        checks = {"retail": _check_retail, "banking": _check_banking, "iot": _check_iot}
        for name in ("banking", "iot", "retail"):
            _open_tab(browser, pipelines[name])
            expected = checks[name](browser, spark, lake)
            streams = {t["name"] for t in _chart(browser, f"{name}-stream_health")}
            flows = {f.name for f in pipelines[name].flows}
            assert streams and streams <= flows, name

        # A new delivery: the page reads the lake again and draws the new totals.
        generate(lake.landing, events=200, customers=10, files=1, seed=32)
        run_available_now(spark, lake.with_options(pipelines=("retail",)))
        grown = _revenue_by_country(spark, lake)
        assert grown != expected

        def redrawn() -> bool:
            (now,) = _chart(browser, "retail-revenue_by_country")
            return dict(zip(now["x"], now["y"], strict=True)) == pytest.approx(grown)

        assert wait_until(redrawn, 60, 0.5)
        assert "no data yet" not in browser.page_source
    finally:
        if browser is not None:
            browser.quit()
        server.terminate()
        server.wait(timeout=30)
