"""The banking contracts and alert rules, in batch: every refusal has its reason, and each rule
fires by its threshold, in the documented order."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest

from medallion.config import Config, parse_settings
from medallion.deployment import checked, setting
from medallion.errors import ConfigError
from medallion.pipelines.banking.contract import validate_account_changes, validate_transactions
from medallion.pipelines.banking.transforms import AlertRules, screen

TX = {
    "transaction_id": "t1",
    "account_id": "a1",
    "amount": 25.5,
    "currency": "EUR",
    "merchant": "cafe",
    "channel": "card",
    "transaction_timestamp": "2026-11-25T10:00:00+01:00",
}
PROFILE = {
    "account_id": "a1",
    "risk_score": 0.2,
    "opened_at": "2025-01-01T00:00:00Z",
    "avg_transaction_amount": 40,
    "country": "DE",
    "operation": "UPDATE",
    "sequence_num": 3,
    "updated_at": "2026-11-25T08:00:00Z",
}


def _bronze(spark, records: list[dict]):
    return spark.createDataFrame(
        [(json.dumps(r), f"file:/f{i}", None) for i, r in enumerate(records)],
        "_raw STRING, _source_file STRING, _ingested_at TIMESTAMP",
    )


def _reasons(validated) -> list[str | None]:
    return [r.reason for r in validated.orderBy("_source_file").collect()]


def test_transactions_are_refused_with_a_reason_for_each_broken_rule(spark):
    records = [
        TX,
        dict(TX, amount=0),
        dict(TX, amount=-3),
        dict(TX, amount="12.50"),
        dict(TX, currency="eur"),
        dict(TX, transaction_id=" "),
        dict(TX, transaction_timestamp="2026-11-25T10:00:00"),
        dict(TX, merchant=42, channel=None),
    ]
    validated = validate_transactions(_bronze(spark, records))
    reasons = _reasons(validated)
    assert reasons[0] is None and reasons[-1] is None
    assert reasons[1] == "amount is not greater than 0"
    assert reasons[2] == "amount is negative"
    assert reasons[3] == "amount must be a number, got string"
    assert reasons[4] == "currency is not a three-letter upper-case code: eur"
    assert reasons[5] == "transaction_id is empty"
    assert reasons[6] == "transaction_timestamp has no time zone"
    last = validated.orderBy("_source_file").collect()[-1]
    assert (last.merchant, last.channel, last.amount) == ("42", None, Decimal("25.5000"))


def test_account_changes_need_their_profile_unless_they_delete(spark):
    delete = {k: PROFILE[k] for k in ("account_id", "sequence_num", "updated_at")}
    records = [
        PROFILE,
        dict(delete, operation="DELETE"),
        {k: v for k, v in PROFILE.items() if k != "opened_at"},
        dict(PROFILE, risk_score=1.5),
        dict(PROFILE, risk_score="high"),
    ]
    reasons = _reasons(validate_account_changes(_bronze(spark, records)))
    assert reasons[:2] == [None, None]
    assert reasons[2] == "missing field: opened_at (required unless DELETE)"
    assert reasons[3] == "risk_score is outside 0..1: 1.5"
    assert reasons[4] == "risk_score must be a number, got string"


def test_each_rule_fires_by_its_threshold_in_the_documented_order(spark):
    at = dt.datetime(2026, 11, 25, 10)
    transactions = spark.createDataFrame(
        [
            ("quiet", "old", Decimal("50"), at),
            ("every rule", "young", Decimal("5000"), at),
            ("nobody", "gone", Decimal("5"), at),
        ],
        "transaction_id STRING, account_id STRING, amount DECIMAL(18,4), "
        "transaction_timestamp TIMESTAMP",
    ).selectExpr("*", "'EUR' AS currency", "'m' AS merchant", "'card' AS channel")
    accounts = spark.createDataFrame(
        [
            ("old", 0.5, dt.datetime(2020, 1, 1), Decimal("40")),
            ("young", 0.95, dt.datetime(2026, 11, 1), Decimal("100")),
        ],
        "account_id STRING, risk_score DOUBLE, opened_at TIMESTAMP, "
        "avg_transaction_amount DECIMAL(18,4)",
    )
    screened = {r.transaction_id: r for r in screen(transactions, accounts, AlertRules()).collect()}
    assert screened["quiet"].alert_reasons == [] and not screened["quiet"].is_suspicious
    assert screened["every rule"].alert_reasons == [
        "amount_over_average",
        "high_risk_score",
        "new_account_large_amount",
    ]
    assert screened["nobody"].alert_reasons == ["unknown_account"]
    assert screened["nobody"].risk_score is None
    # Thresholds moved: 50 > 1 x 40 fires, a risk of 0.5 is not above 0.5, and a five-year-old
    # account is young under a 3000-day window.
    strict = AlertRules(Decimal(1), Decimal("0.5"), Decimal(3000), Decimal(10))
    quiet = screen(transactions, accounts, strict).where("transaction_id = 'quiet'").first()
    assert quiet.alert_reasons == ["amount_over_average", "new_account_large_amount"]
    assert str(quiet.event_date) == "2026-11-25"


def test_settings_are_checked_when_the_configuration_is_made(tmp_path):
    lake = str(tmp_path)
    assert parse_settings(["fraud_risk_score_above=0.9"]) == {"fraud_risk_score_above": "0.9"}
    config = Config(landing=lake, lake=lake, settings={"fraud_average_multiple": "7.5"})
    assert setting(config, "fraud_average_multiple") == Decimal("7.5")
    assert setting(config, "fraud_new_account_amount") == Decimal(1000)  # the default
    for settings, message in (
        ({"fraud_average_multipel": "7"}, "unknown setting 'fraud_average_multipel'"),
        ({"fraud_average_multiple": "lots"}, "must be a number"),
        ({"fraud_average_multiple": "-1"}, "must be a number >= 0"),
    ):
        with pytest.raises(ConfigError, match=message):
            checked(Config(landing=lake, lake=lake, settings=settings))
    with pytest.raises(ConfigError, match="NAME=VALUE"):
        parse_settings("fraud_average_multiple")
    half_days = Config(landing=lake, lake=lake, settings={"fraud_new_account_days": "2.5"})
    with pytest.raises(ConfigError, match="whole days"):
        AlertRules.from_config(half_days)
