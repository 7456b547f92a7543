"""The dashboard: one set of views for Lakeview and for ``medallion dashboard``.

The Lakeview file is generated from the views, and each view's SQL gives the same rows in
Spark SQL (the dialect of Databricks SQL) as in DuckDB over delta-rs (the local page). The local
page, opened in headless Chromium, draws each chart with the lake's numbers, computed here with
Spark, and follows the lake as a new delivery lands.
"""

from __future__ import annotations

import json
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
from medallion.dashboards import VIEWS, lakeview, query_views
from medallion.pipelines.retail.generator import generate
from medallion.streams.progress import lake_table
from medallion.streams.runner import run_available_now
from medallion.tables import read_table

pytestmark = pytest.mark.slow  # left out of make test-fast (docs/testing.md)

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


@pytest.fixture(scope="module")
def retail_lake(reference_lake, tmp_path_factory):
    """A copy of the reference lake (the browser test lands a delivery in it), run as retail."""
    landing, lake = copy_lake(reference_lake, tmp_path_factory.mktemp("dashboard"))
    return Config(landing=str(landing), lake=str(lake), pipelines=("retail",))


def _rounded(rows):
    def plain(value):
        if isinstance(value, (float, Decimal)):
            return round(float(value), 4)
        if hasattr(value, "isoformat"):
            value = value.isoformat()
        return value.removesuffix("+00:00") if isinstance(value, str) else value

    return [tuple(plain(v) for v in row) for row in rows]


def test_the_lakeview_file_is_the_views_and_their_sql_runs_alike_in_spark(spark, retail_lake):
    committed = json.loads((ROOT / "dashboards" / "medallion.lvdash.json").read_text())
    assert committed == lakeview(), "regenerate: python -m medallion.dashboards > dashboards/..."
    datasets = {d["name"] for d in committed["datasets"]}
    widgets = [item["widget"] for item in committed["pages"][0]["layout"]]
    charted = {q["query"]["datasetName"] for w in widgets for q in w.get("queries", [])}
    assert charted == datasets == {view.name for view in VIEWS}

    local = query_views(retail_lake.lake)
    for view in VIEWS:
        for key in view.tables:
            table = lake_table(retail_lake, key)
            read_table(spark, table).createOrReplaceTempView(table.flat_name)
        in_spark = spark.sql(view.sql).collect()
        assert in_spark, view.name
        columns = list(local[view.name][0])
        assert _rounded(in_spark) == _rounded([[r[c] for c in columns] for r in local[view.name]])


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


def _chart(browser, name: str) -> list[dict]:
    """The traces Plotly drew for one chart: their names, x and y."""
    return browser.execute_script(
        "const plot = document.querySelector(`#${arguments[0]} .js-plotly-plot`);"
        "return plot && plot.data ? plot.data.map(t => ({name: t.name, x: t.x, y: t.y})) : null;",
        name,
    )


def _revenue_by_country(spark, config) -> dict[str, float]:
    gold = read_table(spark, config.table("gold/daily_revenue_by_country"))
    totals = gold.groupBy("country").agg(F.sum("revenue").alias("revenue")).collect()
    return {r.country: float(r.revenue) for r in totals}


def test_the_local_page_draws_each_chart_with_the_lakes_numbers_and_follows_the_lake(
    spark, retail_lake
):
    port = free_port()
    server = subprocess.Popen(
        [MEDALLION, "dashboard", "--lake", retail_lake.lake, "--port", str(port), "--refresh", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    browser = None
    try:
        assert server.stdout.readline().startswith(f"medallion dashboard: http://127.0.0.1:{port}/")
        browser = _browser()
        browser.get(f"http://127.0.0.1:{port}/")
        assert wait_until(lambda: all(_chart(browser, v.name) for v in VIEWS), 60, 0.5)

        (revenue,) = _chart(browser, "revenue_by_country")
        expected = _revenue_by_country(spark, retail_lake)
        assert dict(zip(revenue["x"], revenue["y"], strict=True)) == pytest.approx(expected)

        reasons: Counter = Counter()
        for key in ("silver/events_quarantine", "silver/customers_quarantine"):
            for row in read_table(spark, retail_lake.table(key)).collect():
                reasons[row.reason] += 1
        (drawn,) = _chart(browser, "quarantine_reasons")
        assert dict(zip(drawn["x"], drawn["y"], strict=True)) == dict(reasons)

        metrics = {t["name"]: sum(t["y"]) for t in _chart(browser, "gold_metrics")}
        gold = read_table(spark, retail_lake.table("gold/hourly_product_metrics"))
        sums = gold.agg(*(F.sum(c).alias(c) for c in ("views", "add_to_carts", "purchases")))
        assert metrics == sums.first().asDict()

        streams = {t["name"] for t in _chart(browser, "stream_health")}
        assert {"bronze_events", "silver_customers"} <= streams

        # A new delivery: the page reads the lake again and draws the new totals.
        generate(retail_lake.landing, events=200, customers=10, files=1, seed=32)
        run_available_now(spark, retail_lake)
        grown = _revenue_by_country(spark, retail_lake)
        assert grown != expected

        def redrawn() -> bool:
            (now,) = _chart(browser, "revenue_by_country")
            return dict(zip(now["x"], now["y"], strict=True)) == pytest.approx(grown)

        assert wait_until(redrawn, 60, 0.5)
        assert "no data yet" not in browser.page_source
    finally:
        if browser is not None:
            browser.quit()
        server.terminate()
        server.wait(timeout=30)
