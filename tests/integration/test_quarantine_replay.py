"""``medallion quarantine replay``: quarantined records checked again against a contract widened
through the settings, and those that now pass promoted into silver and followed by gold, equal
to the plain-Python oracle of the widened contract, in every pipeline; a second replay promotes
nothing, and a replay interrupted anywhere is finished by the next one, exactly once."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from banking_oracle import Deliveries, account_change, transaction
from iot_oracle import expected_from as iot_expected
from iot_oracle import parse as iot_parse
from lake_checks import assert_banking_matches, assert_iot_matches, assert_lake_matches
from oracle import EVENT_TYPES, event_is_valid, expected_from, read_lines

from medallion.cli import main
from medallion.config import Config
from medallion.faults import FAIL_AT_ENV, InjectedFault
from medallion.generate import FaultRates, write_file_atomically
from medallion.locks import stream_locks
from medallion.ops.replay import ReplayResult, replay_quarantines, replays_table
from medallion.pipelines import pipelines
from medallion.pipelines.retail.generator import generate
from medallion.quality_log import quality_table
from medallion.streams.runner import run_available_now
from medallion.tables import read_table, table_exists

pytestmark = pytest.mark.slow  # left out of make test-fast (docs/testing.md)

WIDE_EVENTS = {"expect.events.event_type_allowed": "warn"}
FAULTS = FaultRates(invalid=0.15, malformed=0.05, duplicate=0.1)


def _event(event_id: str, event_type: str = "refund", **fields) -> str:
    record = {
        "event_id": event_id,
        "event_type": event_type,
        "user_id": "u-replay",
        "product_id": "p-replay",
        "event_timestamp": "2026-11-20T09:30:00Z",
        **fields,
    }
    return json.dumps({k: v for k, v in record.items() if v is not None})


def _land_events(landing: Path, name: str, lines: list[str]) -> None:
    write_file_atomically(str(landing / "events"), name, lines)


def _newly_valid(landing: Path) -> list[str]:
    """The event lines the widened contract accepts and the original refuses, in arrival order."""
    lines = [line for _, line in read_lines(landing / "events")]
    return [line for line in lines if not event_is_valid(line) and event_is_valid(line, None)]


def _result(results, quarantine: str):
    (found,) = [r for r in results if r.quarantine == quarantine and not r.resumed]
    return found


def test_a_widened_contract_promotes_quarantined_events_into_silver_and_gold_exactly(
    spark, dirs, capsys
):
    landing, lake = dirs
    generate(str(landing), events=250, customers=10, files=2, seed=21, faults=FAULTS)
    held = next(
        doc
        for _, line in read_lines(landing / "events")
        if (doc := event_is_valid(line)) is not None
    )
    _land_events(
        landing,
        "events-9-hand.json",
        [
            _event("r-1"),
            _event("r-1"),  # the same line twice: one is promoted, the other is its duplicate
            _event("r-2", "wishlist", user_id="u-other"),
            _event("r-3", user_id=None),  # also lacks its user: stays quarantined
            _event(held["event_id"]),  # silver holds this event_id from an earlier file
            _event("r-4", "view", event_timestamp="yesterday"),  # another reason: not chosen
        ],
    )
    config = Config(landing=str(landing), lake=str(lake), pipelines=("retail",))
    run_available_now(spark, config)
    quarantine = config.table("silver/events_quarantine")
    before = read_table(spark, quarantine).count()
    newly_valid = _newly_valid(landing)
    original = expected_from(landing)
    new_ids = {json.loads(line)["event_id"] for line in newly_valid} - set(original.silver)
    widened = config.with_options(settings=WIDE_EVENTS)
    command = ["quarantine", "replay", "--lake", str(lake), "--pipeline", "retail"]
    widen = [
        "--set",
        "expect.events.event_type_allowed=warn",
        "--reason-like",
        "unknown event_type",
    ]

    assert main([*command, *widen, "--dry-run", "--output", "json"]) == 0

    dry = {r["quarantine"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(dry) == {"silver/events_quarantine", "silver/customers_quarantine"}
    events = ReplayResult(**dry["silver/events_quarantine"])
    assert (events.passing, events.promoted) == (len(newly_valid), len(new_ids))
    assert events.duplicates == len(newly_valid) - len(new_ids) >= 2
    assert events.chosen > events.passing  # r-3 and the generated faults of several reasons
    assert read_table(spark, quarantine).count() == before
    assert not table_exists(spark, replays_table(config))
    # Refused while a run holds the stream's lock, before it writes anything.
    with stream_locks(config.checkpoints_folder, ["bronze_events"], "medallion run (stream)"):
        assert main([*command, *widen]) == 2
    assert "bronze_events" in capsys.readouterr().err
    assert read_table(spark, quarantine).count() == before
    assert main([*command, "--set", "expect.events.no_such_rule=warn"]) == 2
    assert "no_such_rule" in capsys.readouterr().err

    results = replay_quarantines(spark, widened, reason_like="unknown event_type")

    assert _result(results, "silver/events_quarantine") == replace(events, replay_id=1)
    assert_lake_matches(spark, widened, expected_from(landing, event_types=None))
    log = read_table(spark, replays_table(config)).where("replay_id = 1").collect()
    outcomes = sorted(r.outcome for r in log)
    assert outcomes.count("promoted") == len(new_ids) and outcomes.count("finished") == 1
    assert all(r.reason.startswith("unknown event_type") for r in log if r.outcome != "finished")
    assert all(json.loads(r.settings) == WIDE_EVENTS for r in log)
    quality = read_table(spark, quality_table(config)).where("stream = 'replay_silver_events'")
    logged = quality.collect()
    assert {(r.batch_id, r.passed + r.failed) for r in logged} == {(1, len(newly_valid))}
    (warned,) = [r for r in logged if r.rule == "event_type_allowed"]
    assert (warned.failed, warned.action) == (len(newly_valid), "warn")

    # Nothing is left to promote; a copy of a promoted event re-sent later, read by a run with
    # the widened contract, is a duplicate like any other (the stream learns silver's keys again).
    assert main([*command, *widen]) == 0
    out = capsys.readouterr().out
    assert "silver/events_quarantine: " in out and ", 0 now pass: promoted 0," in out
    _land_events(landing, "events-9-resent.json", [_event("r-1")])
    run_available_now(spark, widened)
    assert_lake_matches(spark, widened, expected_from(landing, event_types=None))


def test_a_replay_interrupted_anywhere_is_finished_by_the_next_one_exactly_once(
    spark, dirs, monkeypatch
):
    """Interrupted after silver's append (gold not fed yet), then after gold was fed (the
    records still in the quarantine): each time the next replay finishes it, with the settings
    it was planned with whatever it is given, and the lake equals the oracle."""
    landing, lake = dirs
    generate(str(landing), events=80, customers=5, files=1, seed=22, faults=FAULTS)
    # Types the generator does not make, one per round.
    kinds = {"quarantine_replay:promoted": "gift", "quarantine_replay:fed": "wishlist"}
    hand_made = [
        _event(f"{kind}-{n}", kind, user_id=f"u{n}") for kind in kinds.values() for n in range(3)
    ]
    _land_events(landing, "events-9-hand.json", hand_made)
    config = Config(landing=str(landing), lake=str(lake), pipelines=("retail",))
    widened = config.with_options(settings=WIDE_EVENTS)
    run_available_now(spark, config)
    for round, (point, kind) in enumerate(kinds.items(), 1):
        monkeypatch.setenv(FAIL_AT_ENV, point)
        with pytest.raises(InjectedFault):
            replay_quarantines(spark, widened, reason_like=f"unknown event_type: {kind}")
        monkeypatch.delenv(FAIL_AT_ENV)
        results = replay_quarantines(spark, config)

        resumed = [(r.quarantine, r.replay_id, r.promoted) for r in results if r.resumed]
        assert resumed == [("silver/events_quarantine", round, 3)], point
    # The generated events of other unknown types stay quarantined: they were not chosen.
    accepted = {*EVENT_TYPES, *kinds.values()}
    assert_lake_matches(spark, widened, expected_from(landing, event_types=accepted))


def test_iot_and_banking_records_of_a_widened_rule_are_promoted_and_gold_follows(spark, dirs):
    """IoT readings out of the humidity range, banking transactions with a lower-case currency
    and an account change with a risk score above 1: promoted, then gold reads silver's new
    rows as a stream. The account changes are replayed first, through the sequence-aware MERGE,
    and a promoted transaction is screened against the profiles as they are then."""
    landing, lake = dirs
    faults = FaultRates(duplicate=0.1, late=0.1, invalid=0.2, malformed=0.03)
    for pipeline in pipelines(["iot", "banking"]):
        assert pipeline.generate is not None
        pipeline.generate(str(landing), records=150, files=1, seed=24, faults=faults)
    risky = {
        "account_id": "acct-replay",
        "risk_score": 1.5,
        "opened_at": "2026-01-02T00:00:00Z",
        "avg_transaction_amount": 10.0,
        "operation": "INSERT",
        "sequence_num": 1,
        "updated_at": "2026-11-25T09:00:00Z",
    }
    spend = {
        "transaction_id": "tx-replay",
        "account_id": "acct-replay",
        "amount": 25.5,
        "currency": "eur",
        "transaction_timestamp": "2026-11-25T10:00:00Z",
    }
    write_file_atomically(str(landing / "accounts"), "accounts-99-replay.json", [json.dumps(risky)])
    write_file_atomically(
        str(landing / "transactions"), "transactions-99-replay.json", [json.dumps(spend)]
    )
    config = Config(landing=str(landing), lake=str(lake), pipelines=("iot", "banking"))
    deliveries = Deliveries(landing)
    run_available_now(spark, config)
    oracle = deliveries.ran()
    widened = config.with_options(
        settings={
            "expect.device_readings.humidity_in_range": "warn",
            "expect.transactions.currency_code": "warn",
            "expect.accounts.risk_score_in_range": "warn",
        }
    )
    readings = [line for _, line in read_lines(landing / "device_readings")]
    humid = [line for line in readings if not iot_parse(line) and iot_parse(line, True)]
    lines = [line for _, line in read_lines(landing / "transactions")]
    currency = [line for line in lines if not transaction(line) and transaction(line, True)]
    changes = [line for _, line in read_lines(landing / "accounts")]
    risk = [line for line in changes if not account_change(line) and account_change(line, True)]
    assert humid and currency and risk

    results = replay_quarantines(spark, widened)
    run_available_now(spark, widened)

    assert _result(results, "silver/device_readings_quarantine").passing == len(humid)
    assert _result(results, "silver/transactions_quarantine").passing == len(currency)
    assert _result(results, "silver/accounts_quarantine").passing == len(risk)
    assert_iot_matches(spark, widened, iot_expected(landing, any_humidity=True))
    oracle.any_currency = oracle.any_risk = True
    oracle.run(risk, currency)  # the profiles first, as the replay does
    oracle.quarantined_transactions -= len(currency)
    oracle.quarantined_accounts -= len(risk)
    assert oracle.transactions["tx-replay"]["alert_reasons"] == ["high_risk_score"]
    assert_banking_matches(spark, widened, oracle)
