"""The banking pipeline's pure transformations: DataFrame in, DataFrame out, testable in batch.

The alert rules, in the order ``alert_reasons`` lists them (each threshold is a setting):

1. ``amount_over_average``: ``amount > fraud_average_multiple x avg_transaction_amount``
2. ``high_risk_score``: ``risk_score > fraud_risk_score_above``
3. ``new_account_large_amount``: ``transaction_timestamp - opened_at <
   fraud_new_account_days`` days and ``amount > fraud_new_account_amount``
4. ``unknown_account``: no live profile of the account when the batch is processed (never
   seen, or deleted)
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from medallion.config import Config
from medallion.deployment import setting
from medallion.errors import ConfigError
from medallion.json_columns import MONEY_SUM_TYPE
from medallion.pipelines.banking.contract import TRANSACTION_COLUMNS
from medallion.transforms.change_records import ChangeRecords

ACCOUNTS = ChangeRecords(
    "account_id", ("risk_score", "opened_at", "avg_transaction_amount", "country")
)
SILVER_COLUMNS = (
    *TRANSACTION_COLUMNS,
    "event_date",
    "risk_score",
    "is_suspicious",
    "alert_reasons",
)
ALERT_COLUMNS = (
    "transaction_id",
    "account_id",
    "amount",
    "transaction_timestamp",
    "alert_reasons",
)


@dataclass(frozen=True)
class AlertRules:
    """The thresholds of the alert rules."""

    average_multiple: Decimal = Decimal(5)
    risk_score_above: Decimal = Decimal("0.8")
    new_account_days: Decimal = Decimal(30)
    new_account_amount: Decimal = Decimal(1000)

    @classmethod
    def from_config(cls, config: Config) -> AlertRules:
        days = setting(config, "fraud_new_account_days")
        if days != days.to_integral_value():
            raise ConfigError(f"setting fraud_new_account_days must be whole days, not {days}")
        return cls(
            setting(config, "fraud_average_multiple"),
            setting(config, "fraud_risk_score_above"),
            days,
            setting(config, "fraud_new_account_amount"),
        )

    def reasons(self) -> list[tuple[str, Column]]:
        """Each rule's name and the condition that fires it, over a transaction joined with
        its account's profile (``_known`` true when there is one)."""
        amount = F.col("amount")
        days = F.make_dt_interval(F.lit(int(self.new_account_days)))
        return [
            (
                "amount_over_average",
                amount > F.lit(self.average_multiple) * F.col("avg_transaction_amount"),
            ),
            ("high_risk_score", F.col("risk_score") > F.lit(float(self.risk_score_above))),
            (
                "new_account_large_amount",
                (F.col("transaction_timestamp") < F.col("opened_at") + days)
                & (amount > F.lit(self.new_account_amount)),
            ),
            ("unknown_account", ~F.col("_known")),
        ]


def screen(transactions: DataFrame, accounts: DataFrame, rules: AlertRules) -> DataFrame:
    """Each transaction with its account's ``risk_score`` as known now, the rules that fire
    (``alert_reasons``, in the rules' order; empty when none) and ``is_suspicious``."""
    profiles = accounts.select(
        "account_id",
        "risk_score",
        "opened_at",
        "avg_transaction_amount",
        F.lit(True).alias("_known"),
    )
    joined = transactions.join(profiles, "account_id", "left").fillna({"_known": False})
    fired = F.array_compact(
        F.array(*[F.when(F.coalesce(c, F.lit(False)), F.lit(name)) for name, c in rules.reasons()])
    )
    screened = joined.select(
        "*",
        F.to_date("transaction_timestamp").alias("event_date"),
        fired.alias("alert_reasons"),
    )
    return screened.select(
        *SILVER_COLUMNS[:-2],
        (F.size("alert_reasons") > 0).alias("is_suspicious"),
        "alert_reasons",
    )


def fraud_alerts(transactions: DataFrame) -> DataFrame:
    """The suspicious transactions, as the alert queue lists them."""
    return transactions.where("is_suspicious").select(*ALERT_COLUMNS)


def daily_activity_increments(transactions: DataFrame) -> DataFrame:
    """Per (account, UTC date): what a MERGE adds to the day's row."""
    flagged = F.col("is_suspicious")
    return transactions.groupBy("account_id", "event_date").agg(
        F.count("*").alias("transactions"),
        F.sum("amount").cast(MONEY_SUM_TYPE).alias("amount"),
        F.count_if(flagged).alias("flagged_transactions"),
        F.coalesce(F.sum(F.when(flagged, F.col("amount"))), F.lit(0))
        .cast(MONEY_SUM_TYPE)
        .alias("flagged_amount"),
        F.max("amount").alias("max_amount"),
    )


ADD_DAILY_ACTIVITY = """
    WHEN MATCHED THEN UPDATE SET
        t.transactions = t.transactions + s.transactions,
        t.amount = t.amount + s.amount,
        t.flagged_transactions = t.flagged_transactions + s.flagged_transactions,
        t.flagged_amount = t.flagged_amount + s.flagged_amount,
        t.max_amount = greatest(t.max_amount, s.max_amount)
    WHEN NOT MATCHED THEN INSERT *
"""
