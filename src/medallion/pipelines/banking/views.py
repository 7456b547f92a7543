"""The banking dashboard, "Fraud alerts": the alert queue, alerts per hour by reason, and the
share of each account's transactions that were flagged."""

from __future__ import annotations

from medallion.declarations import View
from medallion.pipelines.banking.transforms import ALERT_REASONS

_PER_REASON = "\nUNION ALL\n".join(
    f"SELECT date_trunc('hour', transaction_timestamp) AS hour, '{reason}' AS reason, "
    f"COUNT(*) AS alerts\nFROM gold_fraud_alerts WHERE array_contains(alert_reasons, '{reason}')\n"
    "GROUP BY date_trunc('hour', transaction_timestamp)"
    for reason in ALERT_REASONS
)

VIEWS = (
    View(
        name="alert_queue",
        title="Fraud alerts: the queue, newest first",
        sql=(
            "SELECT transaction_timestamp, transaction_id, account_id, amount,\n"
            "  concat_ws(', ', alert_reasons) AS reasons\n"
            "FROM gold_fraud_alerts\n"
            "ORDER BY transaction_timestamp DESC, transaction_id\n"
            "LIMIT 500"
        ),
        tables=("gold/fraud_alerts",),
        kind="table",
        columns=("transaction_timestamp", "transaction_id", "account_id", "amount", "reasons"),
    ),
    View(
        name="alerts_by_reason",
        title="Alerts per hour, by reason",
        sql=f"{_PER_REASON}\nORDER BY hour, reason",
        tables=("gold/fraud_alerts",),
        kind="bar",
        x="hour",
        y="alerts",
        color="reason",
        x_type="temporal",
    ),
    View(
        name="flagged_share",
        title="Flagged share of each account's transactions (the 20 highest)",
        sql=(
            "SELECT account_id,\n"
            "  CAST(SUM(flagged_transactions) AS DOUBLE) / SUM(transactions) AS flagged_share,\n"
            "  SUM(transactions) AS transactions\n"
            "FROM gold_account_daily_activity GROUP BY account_id\n"
            "ORDER BY flagged_share DESC, account_id\n"
            "LIMIT 20"
        ),
        tables=("gold/account_daily_activity",),
        kind="bar",
        x="account_id",
        y="flagged_share",
    ),
)
