"""``silver/customers_history`` and ``silver/accounts_history`` through real runs (issue 30): the
versions the plain-Python oracle reads from the landed lines, whatever the order and batching
in which the changes land, after a crash between the history's MERGE and its checkpoint, on a
lake written before the history existed, and the accounts' current versions equal to silver's
profiles."""

from __future__ import annotations

import json
import shutil

import pytest
from history_oracle import (
    ORDERS,
    arriving,
    expected_in_order,
    in_batches,
    landed_changes,
    rows_in_order,
)

from medallion.config import Config
from medallion.faults import FAIL_AT_ENV
from medallion.generate import write_file_atomically
from medallion.pipelines import generate_input
from medallion.pipelines.retail.generator import generate_customer_lines
from medallion.streams.flows import flow
from medallion.streams.runner import PipelineError, run_available_now
from medallion.tables import history, read_table

pytestmark = pytest.mark.slow

CUSTOMER_FLOWS = tuple(flow(name) for name in ("bronze_customers", "silver_customers"))
TRACKED = ("country", "segment")
SETTINGS = {"track_history_columns": "+".join(TRACKED)}


def _change(customer: str, operation: str, sequence: int, when: str, **content: str) -> str:
    base = {"name": "Eve", "email": "eve@example.com", "country": "DE", "segment": "retail"}
    return json.dumps(
        {
            "customer_id": customer,
            **base,
            **content,
            "operation": operation,
            "sequence_num": sequence,
            "updated_at": f"2026-10-{when}Z",
        }
    )


def _lines() -> list[str]:
    """Generated changes (shuffled, re-sent, tied, invalid) and the cases the generator has
    not: a re-insert after a delete, an untracked change, a second delete, and a change older
    than everything else of its customer."""
    generated = list(generate_customer_lines(40, seed=31))
    cases = [
        _change("h1", "INSERT", 1, "01T00:00:00"),
        _change("h1", "UPDATE", 2, "02T00:00:00", email="eve@new.example.com"),  # untracked
        _change("h1", "UPDATE", 3, "03T00:00:00", country="FR"),
        _change("h1", "DELETE", 4, "04T00:00:00"),
        _change("h1", "DELETE", 5, "05T00:00:00"),
        _change("h1", "INSERT", 6, "06T00:00:00", country="ES"),
        _change("h1", "UPDATE", 0, "01T00:00:00", segment="smb"),  # older than all of h1
    ]
    return generated + cases


def _land_and_run(spark, config: Config, chunks: list[list[str]], first: int = 0) -> None:
    for i, chunk in enumerate(chunks, start=first):
        write_file_atomically(f"{config.landing}/customers", f"customers-{i:02d}.json", chunk)
        run_available_now(spark, config, CUSTOMER_FLOWS)


@pytest.mark.parametrize("order", ORDERS)
def test_the_customers_history_is_the_oracles_whatever_the_arrival_order(spark, tmp_path, order):
    config = Config(landing=str(tmp_path / "landing"), lake=str(tmp_path / "lake"))
    config = config.with_options(settings=SETTINGS)
    _land_and_run(spark, config, in_batches(arriving(_lines(), order, seed=32)))

    table = config.table("silver/customers_history")
    got = rows_in_order(read_table(spark, table))
    expected = expected_in_order(landed_changes(tmp_path / "landing"), TRACKED)
    assert got == expected
    h1 = [r for r in expected if r["customer_id"] == "h1"]
    assert [(r["country"], r["segment"], r["operation"], r["is_current"]) for r in h1] == [
        ("DE", "smb", "UPDATE", False),  # the late, older change opened the first version
        ("DE", "retail", "UPDATE", False),  # the untracked email change updated it in place
        ("FR", "retail", "DELETE", False),
        (None, None, "DELETE", False),  # a second delete, with nothing open
        ("ES", "retail", "INSERT", True),
    ]
    properties = spark.sql(f"SHOW TBLPROPERTIES {table.sql_name}").collect()
    assert {r.key: r.value for r in properties}["delta.enableChangeDataFeed"] == "true"


def test_a_crash_after_the_history_merge_is_replayed_without_a_second_merge(
    spark, tmp_path, monkeypatch
):
    config = Config(landing=str(tmp_path / "landing"), lake=str(tmp_path / "lake"))
    config = config.with_options(settings=SETTINGS)
    lines = _lines()
    monkeypatch.setenv(FAIL_AT_ENV, "silver_customers:customers_history_merged")
    with pytest.raises(PipelineError, match="stream .silver_customers. .* failed"):
        _land_and_run(spark, config, [lines])
    monkeypatch.delenv(FAIL_AT_ENV)
    table = config.table("silver/customers_history")
    # The batch's write committed before the crash: into the empty history, an append in
    # place of the MERGE (BatchWrites.merge).
    writes = history(spark, table).where("operation IN ('MERGE', 'WRITE')").count()
    assert writes == 1
    run_available_now(spark, config, CUSTOMER_FLOWS)  # replays the batch
    assert history(spark, table).where("operation IN ('MERGE', 'WRITE')").count() == writes
    got = rows_in_order(read_table(spark, table))
    assert got == expected_in_order(landed_changes(tmp_path / "landing"), TRACKED)


def test_a_lake_from_before_the_history_gets_it_filled_from_bronze_then_kept(spark, tmp_path):
    config = Config(landing=str(tmp_path / "landing"), lake=str(tmp_path / "lake"))
    config = config.with_options(settings=SETTINGS)
    lines = arriving(_lines(), "shuffled", seed=33)
    half = len(lines) // 2
    _land_and_run(spark, config, [lines[:half]])
    # A lake written before the table existed: silver holds customers, the history nothing.
    shutil.rmtree(tmp_path / "lake" / "silver" / "customers_history")
    _land_and_run(spark, config, [lines[half:]], first=1)

    got = rows_in_order(read_table(spark, config.table("silver/customers_history")))
    assert got == expected_in_order(landed_changes(tmp_path / "landing"), TRACKED)


def test_the_accounts_history_holds_every_profile_and_its_current_versions_are_silvers(
    spark, tmp_path
):
    config = Config(landing=str(tmp_path / "landing"), lake=str(tmp_path / "lake"))
    config = config.with_options(pipelines=("banking",))
    for seed in (51, 52):
        generate_input(config.landing, ["banking"], records=120, files=1, seed=seed)
        run_available_now(spark, config)
    columns = ["account_id", "risk_score", "opened_at", "avg_transaction_amount", "country"]
    versions = read_table(spark, config.table("silver/accounts_history"))
    current = versions.where("is_current").select(*columns)
    profiles = read_table(spark, config.table("silver/accounts")).select(*columns)
    assert sorted(current.collect()) == sorted(profiles.collect())
    assert versions.count() > current.count() > 0  # older versions kept
