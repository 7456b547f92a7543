"""Expectations (medallion/expectations.py): every rule's failures counted per batch in
``<lake>/_system/data_quality``, equal to a plain-Python oracle; ``warn`` lets a record pass;
``fail`` stops the stream before its batch writes anything."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from lake_checks import rows_of
from oracle import expected_from, read_lines
from quality_oracle import event_rules_broken

from medallion.config import Config, parse_settings
from medallion.deployment import checked
from medallion.errors import ConfigError, PipelineError
from medallion.generate import FaultRates
from medallion.pipelines.retail.generator import generate
from medallion.quality_log import quality_table
from medallion.streams.runner import run_available_now
from medallion.tables import read_table
from medallion.task_params import TaskParams

# One line per rule that the generated faults do not break, each on a fresh event_id.
HAND_MADE = [
    {
        "event_type": "view",
        "user_id": "u1",
        "product_id": "p1",
        "event_timestamp": "2026-11-01T10:00:00Z",
    },
    {
        "event_type": "view",
        "user_id": "u1",
        "product_id": "p1",
        "category": 7,
        "event_timestamp": "2026-11-01T10:00:00Z",
    },
    {
        "event_type": "purchase",
        "user_id": "u1",
        "product_id": "p1",
        "revenue": 1e300,
        "event_timestamp": "2026-11-01T10:00:00Z",
    },
    {
        "event_type": "purchase",
        "user_id": "u1",
        "product_id": "p1",
        "revenue": 1.23456,
        "event_timestamp": "2026-11-01T10:00:00Z",
    },
    {
        "event_type": "view",
        "user_id": "u1",
        "product_id": "p1",
        "event_timestamp": "2026-11-01T10:00:00+19:00",
    },
    {
        "event_type": "view",
        "user_id": "u1",
        "product_id": "p1",
        "event_timestamp": "1850-01-01T00:00:00Z",
    },
    {"event_type": "view", "user_id": " ", "product_id": "p1", "event_timestamp": 5},
    {
        "event_type": "refund",
        "user_id": "u2",
        "product_id": "p-refund",
        "event_timestamp": "2026-11-01T11:00:00Z",
    },
]


def _land(landing, records, name="hand-made.json"):
    folder = landing / "events"
    folder.mkdir(exist_ok=True)
    lines = []
    for n, record in enumerate(records):
        record = {"event_id": f"hand-{name}-{n}", **record}
        lines.append(json.dumps(record))
    (folder / name).write_text("\n".join(lines) + "\n")


def _log(spark, config: Config, dataset: str) -> list:
    return read_table(spark, quality_table(config)).where(f"dataset = '{dataset}'").collect()


@pytest.mark.slow  # runs of the pipeline
def test_the_log_counts_every_rule_of_every_batch_as_the_oracle_does(spark, dirs):
    landing, lake = dirs
    faults = FaultRates(invalid=0.2, malformed=0.1)
    generate(str(landing), events=150, customers=10, files=3, seed=5, faults=faults)
    _land(landing, HAND_MADE)
    config = Config(landing=str(landing), lake=str(lake), max_files_per_trigger=2)

    run_available_now(spark, config)

    lines = [line for _, line in read_lines(landing / "events")]
    expected = Counter(rule for line in lines for rule in event_rules_broken(line))
    log = _log(spark, config, "events")
    assert {r.stream for r in log} == {"bronze_events"}
    assert {r.table_name for r in log} == {"silver/events"}
    assert all(r.recorded_at is not None for r in log)
    batches = {r.batch_id for r in log}
    assert len(batches) >= 2  # max_files_per_trigger=2 over four files
    got = Counter()
    for row in log:
        got[row.rule] += row.failed
        assert row.action == "quarantine"
    assert {rule: n for rule, n in got.items() if n} == dict(expected)
    assert len({r.rule for r in log}) == 29  # every rule, passed or not, in every batch
    rows_per_batch = {(r.batch_id, r.passed + r.failed) for r in log}
    assert len(rows_per_batch) == len(batches)  # one row count per batch
    assert sum(n for _, n in rows_per_batch) == len(lines)
    silver_versions = {
        v.version for v in spark.sql(f"DESCRIBE HISTORY delta.`{lake}/silver/events`").collect()
    }
    assert {r.table_version for r in log} <= silver_versions | {None}
    # The rules of the other datasets are logged too: one row per rule and batch.
    customers = _log(spark, config, "customers")
    assert customers and {r.stream for r in customers} == {"silver_customers"}
    quarantined = len(rows_of(config, "silver/customers_quarantine"))
    assert sum(r.failed for r in customers) >= quarantined > 0


@pytest.mark.slow  # runs of the pipeline
def test_warn_lets_a_record_pass_into_silver_and_counts_it(spark, dirs):
    landing, lake = dirs
    generate(
        str(landing),
        events=60,
        customers=5,
        files=1,
        seed=6,
        faults=FaultRates(invalid=0, malformed=0),
    )
    refunds = [HAND_MADE[-1], {**HAND_MADE[-1], "user_id": "u3"}]
    _land(landing, refunds)
    settings = parse_settings("expect.events.event_type_allowed=warn")
    config = Config(landing=str(landing), lake=str(lake), settings=settings)

    run_available_now(spark, config)

    silver = read_table(spark, config.table("silver/events"))
    assert silver.where("event_type = 'refund'").count() == 2
    assert len(rows_of(config, "silver/events_quarantine")) == 0
    valid = expected_from(landing).silver  # the oracle of the unwidened contract
    assert silver.count() == len(valid) + 2
    rule = [r for r in _log(spark, config, "events") if r.rule == "event_type_allowed"]
    assert sum(r.failed for r in rule) == 2 and {r.action for r in rule} == {"warn"}
    # Gold: the refunds count as no view, cart or purchase, but their users count.
    gold = read_table(spark, config.table("gold/hourly_product_metrics"))
    refund_hour = gold.where("product_id = 'p-refund'").collect()
    assert [(r.views, r.add_to_carts, r.purchases, r.unique_users) for r in refund_hour] == [
        (0, 0, 0, 2)
    ]
    assert gold.where("product_id <> 'p-refund'").count() == len(expected_from(landing).gold)


@pytest.mark.slow  # runs of the pipeline
def test_fail_stops_the_stream_before_its_batch_writes_then_a_threshold_lets_it_through(
    spark, dirs
):
    landing, lake = dirs
    good = {
        "event_type": "purchase",
        "user_id": "u1",
        "product_id": "p1",
        "event_timestamp": "2026-11-01T10:00:00Z",
    }
    _land(landing, [{**good, "revenue": 5}, {**good, "revenue": -5}, {**good, "revenue": 7}])
    failing = Config(
        landing=str(landing),
        lake=str(lake),
        settings=parse_settings("expect.events.revenue_not_negative=fail"),
    )

    with pytest.raises(PipelineError) as refused:
        run_available_now(spark, failing)

    message = str(refused.value)
    assert "expectation events.revenue_not_negative failed: 1 of 3 rows" in message
    # The failing line is named by where it landed, its values never quoted (personal data).
    assert f"{landing / 'events' / 'hand-made.json'} line 2" in message
    assert 'revenue": ' not in message and '"u1"' not in message
    for key in ("bronze/events", "silver/events", "silver/events_quarantine"):
        assert len(rows_of(failing, key)) == 0, key

    tolerant = failing.with_options(
        settings=parse_settings("expect.events.revenue_not_negative=fail:0.5")
    )
    run_available_now(spark, tolerant)

    assert len(rows_of(tolerant, "bronze/events")) == 3
    assert len(rows_of(tolerant, "silver/events")) == 2
    quarantine = rows_of(tolerant, "silver/events_quarantine")
    assert [r.reason for r in quarantine] == ["revenue is negative"]
    logged = [r for r in _log(spark, tolerant, "events") if r.rule == "revenue_not_negative"]
    assert [(r.action, r.passed, r.failed) for r in logged] == [("fail", 2, 1)]


@pytest.mark.parametrize(
    ("setting", "complaint"),
    [
        ("expect.events.event_id_present=warn", "cannot be set to warn"),
        ("expect.customers.operation_allowed=warn", "cannot be set to warn"),
        ("expect.events.no_such_rule=warn", "events has no rule 'no_such_rule'"),
        ("expect.no_such_dataset.rule=warn", "unknown dataset 'no_such_dataset'"),
        ("expect.events.revenue_type=sometimes", "action is quarantine, warn, fail or fail:RATE"),
        ("expect.events.revenue_type=fail:1.5", "fraction from 0 to below 1"),
        ("expect.events=warn", "expect.<dataset>.<rule>"),
    ],
)
def test_a_wrong_expectation_setting_is_refused_with_what_is_wrong(setting, complaint):
    with pytest.raises(ConfigError, match=re.escape(complaint)):
        checked(Config(landing="/tmp/landing", lake="/tmp/lake", settings=parse_settings(setting)))
    job = {"landing": "/tmp/landing", "lake": "/tmp/lake", "settings": setting}
    with pytest.raises(ConfigError, match=re.escape(complaint)):
        TaskParams.from_mapping(job).config()


def test_a_job_takes_expectations_in_its_settings_parameter():
    settings = "expect.events.event_type_allowed=warn, expect.transactions.currency_code=fail:0.05"
    job = {"landing": "/tmp/landing", "lake": "/tmp/lake", "settings": settings}
    assert TaskParams.from_mapping(job).config().settings == {
        "expect.events.event_type_allowed": "warn",
        "expect.transactions.currency_code": "fail:0.05",
    }


@pytest.mark.slow
def test_every_pipelines_silver_streams_log_each_batch_of_their_datasets(spark, reference_lake):
    config = Config(landing=str(reference_lake / "landing"), lake=str(reference_lake / "lake"))
    log = read_table(spark, quality_table(config)).collect()
    silver = {
        "events": ("bronze/events", "silver/events_quarantine", 29),
        "customers": ("bronze/customers", "silver/customers_quarantine", 24),
        "transactions": ("bronze/transactions", "silver/transactions_quarantine", 26),
        "accounts": ("bronze/accounts", "silver/accounts_quarantine", 36),
        "device_readings": ("bronze/device_readings", "silver/device_readings_quarantine", 26),
    }
    assert {r.dataset for r in log} == set(silver)
    for dataset, (bronze, quarantine, rules) in silver.items():
        rows = [r for r in log if r.dataset == dataset]
        batches = {(r.stream, r.batch_id) for r in rows}
        assert len(rows) == rules * len(batches), dataset  # every rule, every batch
        checked = {(r.stream, r.batch_id): r.passed + r.failed for r in rows}
        assert len(set(checked.items())) == len(batches), dataset
        # Each bronze row was validated once, and each quarantined one broke a rule.
        assert sum(checked.values()) == len(rows_of(config, bronze)), dataset
        quarantined = len(rows_of(config, quarantine))
        assert sum(r.failed for r in rows) >= quarantined > 0, dataset
