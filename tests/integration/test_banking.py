"""Banking transaction monitoring against a plain-Python oracle: account changes applied in
sequence order (deletes included), each transaction once and screened against its account as
known when its batch ran, the alert queue and exact daily activity; across deliveries, after a
kill -9 mid-batch, and from the real Kafka broker."""

from __future__ import annotations

import json

import pytest
from banking_oracle import Banking, Deliveries
from lake_checks import assert_banking_matches, rows_of
from processes import kill_group, start_medallion, wait_until

from medallion.config import Config
from medallion.faults import PAUSE_AT_ENV, PAUSE_DIR_ENV
from medallion.generate import FaultRates, write_file_atomically
from medallion.pipelines import pipelines
from medallion.pipelines.banking.generator import account_change_lines, transaction_lines
from medallion.source_options import KafkaSourceOptions
from medallion.streams.runner import run_available_now

pytestmark = pytest.mark.slow  # left out of make test-fast (docs/testing.md)

FAULTS = FaultRates(duplicate=0.1, late=0.1, invalid=0.05, malformed=0.03)


def _banking(landing, lake, **options) -> Config:
    return Config(landing=str(landing), lake=str(lake), pipelines=("banking",), **options)


def test_banking_matches_its_oracle_across_deliveries(spark, dirs):
    landing, lake = dirs
    (banking,) = pipelines(["banking"])
    assert banking.generate is not None
    config = _banking(landing, lake)
    deliveries = Deliveries(landing)
    banking.generate(str(landing), records=400, files=2, seed=11, faults=FAULTS)
    report = run_available_now(spark, config)
    assert {t.table for t in report.tables} == {t.key for t in banking.tables}
    expected = deliveries.ran()
    reasons = {r for t in expected.transactions.values() for r in t["alert_reasons"]}
    assert reasons == {
        "amount_over_average",
        "high_risk_score",
        "new_account_large_amount",
        "unknown_account",
    }, "the generator exercises every rule"
    assert_banking_matches(spark, config, expected)

    # A second delivery: changes to known accounts (a newer risk score, a delete, an older
    # update that must change nothing), transactions on them, re-sent transactions and a new
    # generated batch.
    live = sorted(expected.accounts.values(), key=lambda a: a["account_id"])
    risky, deleted, stale = live[0], live[1], live[2]

    def change(account: dict, operation: str, sequence: int, **values) -> str:
        record = {
            "account_id": account["account_id"],
            "risk_score": account["risk_score"],
            "opened_at": account["opened_at"].isoformat() + "Z",
            "avg_transaction_amount": float(account["avg_transaction_amount"]),
            "country": account["country"],
        }
        record.update(values, operation=operation, sequence_num=sequence)
        record["updated_at"] = "2026-11-25T09:00:00Z"
        return json.dumps(record)

    write_file_atomically(
        str(landing / "accounts"),
        "accounts-99-00000.json",
        [
            change(risky, "UPDATE", risky["sequence_num"] + 1, risk_score=0.93),
            change(deleted, "DELETE", deleted["sequence_num"] + 1),
            change(stale, "UPDATE", stale["sequence_num"] - 1, risk_score=0.99),
        ],
    )
    on_known = [
        json.dumps(
            {
                "transaction_id": f"tx-99-{n}",
                "account_id": account["account_id"],
                "amount": 12.5,
                "currency": "EUR",
                "merchant": "cafe",
                "channel": "card",
                "transaction_timestamp": "2026-11-25T09:30:00+01:00",
            }
        )
        for n, account in enumerate((risky, deleted, stale))
    ]
    first = sorted((landing / "transactions").glob("*.json"))[0].read_text().split("\n")
    resent = [line for line in first if line and '"amount": ' in line][:5]
    write_file_atomically(
        str(landing / "transactions"), "transactions-99-00000.json", on_known + resent
    )
    banking.generate(str(landing), records=250, files=1, seed=12, faults=FAULTS)
    run_available_now(spark, config)
    expected = deliveries.ran()
    assert expected.transactions["tx-99-0"]["alert_reasons"] == ["high_risk_score"]
    assert expected.transactions["tx-99-1"]["alert_reasons"] == ["unknown_account"]
    assert expected.transactions["tx-99-2"]["alert_reasons"] == []
    assert_banking_matches(spark, config, expected)


def test_a_kill_mid_batch_loses_and_doubles_nothing(spark, tmp_path):
    """``medallion run`` killed with SIGKILL between the quarantine append and the silver
    append of a transactions batch; the next run replays the batch and the lake equals the
    oracle."""
    landing, lake, pauses = tmp_path / "landing", tmp_path / "lake", tmp_path / "pauses"
    pauses.mkdir()
    (banking,) = pipelines(["banking"])
    banking.generate(str(landing), records=300, files=2, seed=14, faults=FAULTS)
    args = ("run", "--landing", str(landing), "--lake", str(lake), "--pipeline", "banking")
    point = "silver_transactions:quarantined"
    process = start_medallion(
        *args,
        log_path=tmp_path / "run.log",
        env={PAUSE_AT_ENV: point, PAUSE_DIR_ENV: str(pauses)},
    )
    try:
        assert wait_until(lambda: (pauses / point).exists(), timeout=300), (
            tmp_path / "run.log"
        ).read_text()[-3000:]
    finally:
        kill_group(process)
    config = _banking(landing, lake)
    assert len(rows_of(config, "silver/transactions")) == 0
    run_available_now(spark, config)
    assert_banking_matches(spark, config, Deliveries(landing).ran())


@pytest.mark.kafka
def test_banking_from_its_topics_matches_its_oracle(spark, kafka_broker, tmp_path):
    """With ``--source kafka`` the banking pipeline reads the transactions and accounts topics."""
    from kafka_broker import produce

    changes, profiles = account_change_lines(40, seed=15, faults=FAULTS)
    transactions = transaction_lines(400, seed=15, faults=FAULTS, profiles=profiles)
    for topic, lines in (("accounts", changes), ("transactions", transactions)):
        kafka_broker.create_topic(topic, partitions=2)
        produce(kafka_broker.bootstrap, topic, lines)
    config = Config(
        landing=str(tmp_path / "lake"),
        lake=str(tmp_path / "lake"),
        source="kafka",
        kafka=KafkaSourceOptions(bootstrap_servers=kafka_broker.bootstrap),
        pipelines=("banking",),
    )
    run_available_now(spark, config)
    assert len(rows_of(config, "bronze/transactions")) == len(transactions)
    # Re-sent copies are byte for byte, so the order of partitions changes no first arrival.
    expected = Banking()
    expected.run(changes, transactions)
    assert_banking_matches(spark, config, expected)
