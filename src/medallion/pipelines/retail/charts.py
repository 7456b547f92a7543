"""Retail's gold at a glance, for the exploration notebook: totals per hour and a chart."""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.config import Config
from medallion.tables import read_table


def hourly_totals(spark: SparkSession, config: Config) -> DataFrame:
    """Gold summed over products: views, carts, purchases and revenue per hour."""
    gold = read_table(spark, config.table("gold/hourly_product_metrics"))
    return (
        gold.groupBy("window_start")
        .agg(
            F.sum("views").alias("views"),
            F.sum("add_to_carts").alias("add_to_carts"),
            F.sum("purchases").alias("purchases"),
            F.sum("revenue").cast("double").alias("revenue"),
        )
        .orderBy("window_start")
    )


def plot_hourly_metrics(spark: SparkSession, config: Config, last_hours: int = 48):
    """A matplotlib figure of the last ``last_hours`` hours of gold: revenue bars, purchases."""
    # deferred: loads matplotlib
    import matplotlib.pyplot as plt

    totals = hourly_totals(spark, config).toPandas()
    if not totals.empty:
        since = totals["window_start"].max() - timedelta(hours=last_hours)
        totals = totals[totals["window_start"] > since]
    figure, revenue_axis = plt.subplots(figsize=(10, 4))
    revenue_axis.bar(totals["window_start"], totals["revenue"], width=1 / 24, color="tab:blue")
    revenue_axis.set_ylabel("revenue per hour (bars)")
    purchases_axis = revenue_axis.twinx()
    purchases_axis.plot(totals["window_start"], totals["purchases"], "o", color="tab:orange")
    purchases_axis.set_ylabel("purchases per hour (dots)")
    revenue_axis.set_title("gold/hourly_product_metrics, all products (UTC hours)")
    figure.autofmt_xdate()
    return figure
