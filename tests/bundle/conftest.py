"""Fixtures of the bundle tests: the bundle, its JSON schema, and a fake workspace."""

from __future__ import annotations

import gzip
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from bundle_support import DEFAULT_SCHEMA, ROOT, FakeWorkspace, comparable_snapshot, python_patterns
from lake_checks import rows_of


@pytest.fixture(scope="session")
def bundle_schema() -> dict:
    path = Path(os.environ.get("MEDALLION_BUNDLE_SCHEMA", DEFAULT_SCHEMA))
    if not path.is_file():
        pytest.fail(f"bundle schema not found at {path}: set MEDALLION_BUNDLE_SCHEMA")
    data = path.read_bytes()
    text = gzip.decompress(data) if path.suffix == ".gz" else data
    schema = python_patterns(json.loads(text))
    for pattern in re.findall(r'"pattern": "((?:[^"\\]|\\.)*)"', json.dumps(schema)):
        re.compile(json.loads(f'"{pattern}"'))  # every pattern compiles in Python
    return schema


@pytest.fixture(scope="session")
def bundle():
    from medallion.bundle.resolve import Bundle

    return Bundle(ROOT)


@pytest.fixture
def workspace(monkeypatch):
    """A fake workspace, with the environment pointing the SDK's unified auth at it."""
    fake = FakeWorkspace()
    fake.thread.start()
    for name in list(os.environ):
        if name.startswith("DATABRICKS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("DATABRICKS_HOST", fake.host)
    monkeypatch.setenv("DATABRICKS_TOKEN", "test-token")
    monkeypatch.setenv("DATABRICKS_CONFIG_FILE", os.devnull)
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


# --- every job of the bundle, run here on tiny data (shared by test_local_jobs, test_connect) --


GOLD = "gold/hourly_product_metrics"
EXPECTATION_SETTING = "expect.transactions.currency_code=fail:0.99"
REPLAY_SETTING = "expect.events.event_type_allowed=warn"


@dataclass
class LocalJobs:
    """The lake that running every job locally left, and what each run reported."""

    landing: Path
    config: object
    outputs: Path
    runs: dict = field(default_factory=dict)
    snapshots: dict = field(default_factory=dict)
    bronze_rows: dict = field(default_factory=dict)
    erased: str = ""
    erase_params: dict = field(default_factory=dict)


@pytest.fixture(scope="session")
def local_jobs(spark, tmp_path_factory) -> LocalJobs:
    """Every job of the bundle, run with ``run_job_locally``: real notebooks, one kernel.

    Two deliveries of generated data: the triggered pipeline processes the first, the
    continuous job (available-now, as it runs locally by default) the second; each time the
    lake must equal the plain-Python oracle (tests/oracle.py). The serverless variant and
    maintenance then find nothing new and must change no row. Last, the exploration and
    change-data notebooks run on the lake.
    """
    from lake_checks import assert_lake_matches
    from oracle import expected_from
    from processes import long_lived_jvm_env

    from medallion.bundle.local_run import run_job_locally
    from medallion.bundle.notebooks import Kernels, execute_notebook
    from medallion.bundle.resolve import Bundle
    from medallion.pipelines.retail.generator import generate
    from medallion.tables import read_table
    from medallion.task_params import TaskParams

    base = tmp_path_factory.mktemp("local-jobs")
    landing, lake, outputs = base / "landing", base / "lake", base / "runs"
    generate(str(landing), events=120, customers=12, files=2, seed=21)
    jobs = Bundle(ROOT).jobs("local", overrides={"landing": str(landing), "lake": str(lake)})
    config = TaskParams.from_mapping(jobs["medallion_pipeline"].parameters).config()
    result = LocalJobs(landing, config, outputs)

    def run(name: str, job_key: str, params: dict[str, str] | None = None) -> None:
        result.runs[name] = run_job_locally(
            jobs[job_key], params, output_dir=outputs / name, kernels=kernels, echo=lambda _: None
        )

    kernel_env = long_lived_jvm_env()  # one kernel serves every run
    with Kernels(shared=True, log_path=outputs / "kernels.log", env=kernel_env) as kernels:
        run("pipeline", "medallion_pipeline")
        assert_lake_matches(spark, config, expected_from(landing))
        result.bronze_rows["pipeline"] = len(rows_of(config, "bronze/events"))
        # Gold records its changes from here on, for the exploration notebook's CDF read.
        gold = config.table(GOLD).sql_name
        spark.sql(f"ALTER TABLE {gold} SET TBLPROPERTIES (delta.enableChangeDataFeed = true)")
        generate(str(landing), events=50, customers=0, files=1, seed=22)
        run("stream", "medallion_stream")
        assert_lake_matches(spark, config, expected_from(landing))
        result.bronze_rows["stream"] = len(rows_of(config, "bronze/events"))
        result.snapshots["stream"] = comparable_snapshot(spark, config)
        for name, job_key in (
            ("serverless", "medallion_pipeline_serverless"),
            ("maintenance", "medallion_maintenance"),
        ):
            run(name, job_key)
            result.snapshots[name] = comparable_snapshot(spark, config)
        params = {"landing": str(landing), "lake": str(lake), "cdf_table": GOLD}
        for name, extra in (("explore", {}), ("changes", {"flows": "gold_customer_changes"})):
            result.runs[name] = execute_notebook(
                ROOT / "notebooks" / f"{name}.ipynb",
                {**params, **extra},
                kernels,
                output_path=outputs / f"{name}.ipynb",
            )
        _run_the_new_pipelines_jobs(spark, landing, config, run)
        # The contract widened through the settings parameter: the generated event of an
        # unknown type leaves the quarantine for silver, and gold follows.
        widened = {"settings": REPLAY_SETTING, "reason_like": "unknown event_type"}
        run("replay", "medallion_quarantine_replay", widened)
        assert_lake_matches(spark, config, expected_from(landing, event_types=None))
        # Last, a shopper erased from retail through the erasure job, by a request that holds
        # their keyed hash: the job's parameters name no one (tests/integration/test_erasure.py
        # holds every table to its oracle). result.erased names them.
        from medallion.ops.erasure_requests import request_erasure

        silver = read_table(spark, config.table("silver/events"))
        result.erased = silver.groupBy("user_id").count().orderBy("count", "user_id").first()[0]
        retail = config.with_options(pipelines=("retail",))
        result.erase_params = {
            "request": request_erasure(spark, retail, result.erased),
            "pipeline": "retail",
        }
        run("erase", "medallion_erase", result.erase_params)
    return result


def _run_the_new_pipelines_jobs(spark, landing: Path, config, run) -> None:
    """Banking and IoT through their own jobs, into the same lake as retail, each checked
    against its oracle: banking's triggered job with a threshold given as a job parameter,
    then its continuous job (available-now) on a second delivery, and IoT's triggered job."""
    from banking_oracle import Deliveries, Rules
    from iot_oracle import expected_from as iot_expected
    from lake_checks import assert_banking_matches, assert_iot_matches

    from medallion.pipelines import generate_input

    generate_input(str(landing), ["banking", "iot"], records=150, files=1, seed=23)
    banking = Deliveries(landing, Rules(risk_score_above=0.3))
    # An expectation through the same parameter: fail beyond 99% of a batch, so these
    # records are quarantined as by default (test_local_jobs checks the action logged).
    settings = f"fraud_risk_score_above=0.3,{EXPECTATION_SETTING}"
    run("banking", "medallion_banking", {"settings": settings})
    assert_banking_matches(spark, config, banking.ran())
    run("iot", "medallion_iot")
    assert_iot_matches(spark, config, iot_expected(landing))
    generate_input(str(landing), ["banking"], records=60, files=1, seed=24)
    run("banking_stream", "medallion_banking_stream", {"settings": "fraud_risk_score_above=0.3"})
    assert_banking_matches(spark, config, banking.ran())
