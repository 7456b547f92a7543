"""The alert rules, and the screen of transactions by them: DataFrame in and out, testable.

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
from medallion.pipeline_settings import Setting

# The rules' names, in the order ``alert_reasons`` lists them.
ALERT_REASONS = (
    "amount_over_average",
    "high_risk_score",
    "new_account_large_amount",
    "unknown_account",
)
# The rules' thresholds, in the order AlertRules takes them.
THRESHOLDS = (
    Setting(
        "fraud_average_multiple",
        Decimal(5),
        "amount_over_average fires when the amount exceeds this many times the account's "
        "average transaction amount",
    ),
    Setting(
        "fraud_risk_score_above",
        Decimal("0.8"),
        "high_risk_score fires when the account's risk score exceeds this",
    ),
    Setting(
        "fraud_new_account_days",
        Decimal(30),
        "new_account_large_amount applies to accounts younger than this many whole days",
    ),
    Setting(
        "fraud_new_account_amount",
        Decimal(1000),
        "new_account_large_amount fires on a young account when the amount exceeds this",
    ),
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
        return cls(*(setting(config, threshold.name) for threshold in THRESHOLDS))

    def reasons(self) -> list[tuple[str, Column]]:
        """Each rule's name and the condition that fires it, over a transaction joined with
        its account's profile (``_known`` true when there is one)."""
        amount = F.col("amount")
        days = F.make_dt_interval(F.lit(int(self.new_account_days)))
        over_average, high_risk, new_account, unknown = ALERT_REASONS
        return [
            (over_average, amount > F.lit(self.average_multiple) * F.col("avg_transaction_amount")),
            (high_risk, F.col("risk_score") > F.lit(float(self.risk_score_above))),
            (
                new_account,
                (F.col("transaction_timestamp") < F.col("opened_at") + days)
                & (amount > F.lit(self.new_account_amount)),
            ),
            (unknown, ~F.col("_known")),
        ]


def screen(transactions: DataFrame, accounts: DataFrame, rules: AlertRules) -> DataFrame:
    """Each transaction (its columns, then) with its UTC ``event_date``, its account's
    ``risk_score`` as known now, ``is_suspicious`` and the rules that fire (``alert_reasons``,
    in the rules' order; empty when none)."""
    known = F.lit(True).alias("_known")
    profiles = accounts.select(
        "account_id", "risk_score", "opened_at", "avg_transaction_amount", known
    )
    joined = transactions.join(profiles, "account_id", "left").fillna({"_known": False})
    fired = F.array_compact(
        F.array(*[F.when(F.coalesce(c, F.lit(False)), F.lit(name)) for name, c in rules.reasons()])
    )
    screened = joined.select(
        "*", F.to_date("transaction_timestamp").alias("event_date"), fired.alias("alert_reasons")
    )
    suspicious = (F.size("alert_reasons") > 0).alias("is_suspicious")
    return screened.select(
        *transactions.columns, "event_date", "risk_score", suspicious, "alert_reasons"
    )
