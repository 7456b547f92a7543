"""The IoT dashboard, "Device status": each device's latest reading, and a chosen device's
averages per minute."""

from __future__ import annotations

from medallion.declarations import View

VIEWS = (
    View(
        name="device_status",
        title="Device status: latest reading, last seen",
        sql=(
            "SELECT device_id, status, reading_timestamp AS last_seen, temperature, humidity\n"
            "FROM gold_device_status\n"
            "ORDER BY device_id"
        ),
        tables=("gold/device_status",),
        kind="table",
        columns=("device_id", "status", "last_seen", "temperature", "humidity"),
    ),
    View(
        name="device_minutes",
        title="Temperature and humidity per minute (averages), for the device chosen",
        sql=(
            "SELECT device_id, minute_start AS minute, 'temperature_avg' AS metric,\n"
            "  temperature_avg AS value\n"
            "FROM gold_device_minute_metrics\n"
            "UNION ALL\n"
            "SELECT device_id, minute_start AS minute, 'humidity_avg' AS metric,\n"
            "  humidity_avg AS value\n"
            "FROM gold_device_minute_metrics\n"
            "ORDER BY device_id, minute, metric"
        ),
        tables=("gold/device_minute_metrics",),
        kind="line",
        x="minute",
        y="value",
        color="metric",
        x_type="temporal",
        choose="device_id",
    ),
)
