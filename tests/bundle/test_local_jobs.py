"""Every job of the bundle, run locally: real notebooks, local delta-spark, tiny data.

The runs themselves happen once, in the ``local_jobs`` fixture (tests/bundle/conftest.py),
which also checks the lake against the plain-Python oracle after each job.
"""

from __future__ import annotations

import json

import nbformat
import pytest
import yaml
from bundle_support import ROOT
from pyspark.sql import functions as F

from medallion.cli import main
from medallion.erasure_log import erasures_table
from medallion.quality_log import quality_table
from medallion.tables import history, read_table

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def test_the_triggered_pipeline_runs_its_tasks_in_dependency_order(local_jobs):
    runs = local_jobs.runs["pipeline"]
    assert [(r.key, r.state) for r in runs] == [
        ("bronze", "SUCCESS"),
        ("silver", "SUCCESS"),
        ("gold", "SUCCESS"),
    ]
    # Each task ran its notebook with the job's parameters and printed the run's report.
    bronze = nbformat.read(local_jobs.outputs / "pipeline" / "bronze.ipynb", as_version=4)
    injected = [
        c.source for c in bronze.cells if "injected-parameters" in c.metadata.get("tags", [])
    ]
    assert f"lake = '{local_jobs.config.lake}'" in injected[-1]
    assert "trigger = 'available_now'" in injected[-1]
    assert "bronze/events" in runs[0].text and "rows out" in runs[0].text


def test_the_continuous_job_runs_available_now_locally_and_takes_the_new_delivery(local_jobs):
    runs = local_jobs.runs["stream"]
    assert [(r.key, r.state) for r in runs] == [
        ("bronze", "SUCCESS"),
        ("silver", "SUCCESS"),
        ("gold", "SUCCESS"),
    ]
    assert local_jobs.bronze_rows["stream"] > local_jobs.bronze_rows["pipeline"]


def test_the_banking_and_iot_jobs_run_their_pipeline_only(local_jobs):
    """Their jobs ran every layer (their lakes equal their oracles: the fixture checks), and
    their tasks reported their own tables only."""
    for name in ("banking", "banking_stream", "iot"):
        runs = local_jobs.runs[name]
        assert [(r.key, r.state) for r in runs] == [
            ("bronze", "SUCCESS"),
            ("silver", "SUCCESS"),
            ("gold", "SUCCESS"),
        ], name
        assert "events" not in "".join(r.text for r in runs), name
    assert "gold/fraud_alerts" in local_jobs.runs["banking"][2].text
    assert "gold/device_status" in local_jobs.runs["iot"][2].text


def test_an_expectation_given_in_the_settings_job_parameter_reaches_the_silver_stream(
    spark, local_jobs
):
    log = read_table(spark, quality_table(local_jobs.config))
    first = log.where("dataset = 'transactions'").agg(F.min("batch_id")).first()[0]
    actions = {
        (r.rule, r.action)
        for r in log.where(f"dataset = 'transactions' AND batch_id = {first}").collect()
    }
    assert ("currency_code", "fail") in actions  # the banking job's first batch
    assert ("amount_positive", "quarantine") in actions


def test_the_quarantine_replay_job_promotes_what_its_settings_widen_then_runs_gold(local_jobs):
    """The lake equals the widened contract's oracle after it (tests/bundle/conftest.py)."""
    runs = local_jobs.runs["replay"]
    assert [(r.key, r.state) for r in runs] == [("replay", "SUCCESS"), ("gold", "SUCCESS")]
    printed = runs[0].text.splitlines()
    (events,) = [line for line in printed if line.startswith("silver/events_quarantine: ")]
    assert "now pass: promoted 1, 0 duplicates" in events and "(replay 1)" in events


def test_the_erasure_job_removes_the_requested_subject_without_their_id_as_a_parameter(
    spark, local_jobs
):
    (run,) = local_jobs.runs["erase"]
    assert run.state == "SUCCESS", run.error
    assert any(x.startswith("erasure 1: the subject is gone from ") for x in run.text.splitlines())
    config, subject = local_jobs.config, local_jobs.erased
    # The job ran on a request: neither its parameters nor the job's own name the person.
    assert subject not in json.dumps(local_jobs.erase_params)
    job = yaml.safe_load((ROOT / "resources" / "medallion_erase.job.yml").read_text())
    parameters = job["resources"]["jobs"]["medallion_erase"]["parameters"]
    assert "subject" not in {p["name"] for p in parameters}
    assert subject not in run.text
    bronze = read_table(spark, config.table("bronze/events"))
    assert bronze.where(F.col("_raw").contains(f'"{subject}"')).isEmpty()
    for key in ("silver/events", "gold/hourly_product_users"):
        assert read_table(spark, config.table(key)).where(F.col("user_id") == subject).isEmpty()
    # Only the pipeline given as a parameter: banking's tables are not in the erasure's log.
    log = read_table(spark, erasures_table(config)).where(F.col("erasure_id") == 1)
    assert {r.pipeline for r in log.collect()} == {"", "retail"}


def test_the_serverless_variant_and_maintenance_change_no_rows(spark, local_jobs):
    assert all(r.state == "SUCCESS" for r in local_jobs.runs["serverless"])
    assert [(r.key, r.state) for r in local_jobs.runs["maintenance"]] == [("maintain", "SUCCESS")]
    snapshots = local_jobs.snapshots
    assert snapshots["serverless"] == snapshots["stream"] == snapshots["maintenance"]
    silver = local_jobs.config.table("silver/events")
    operations = [row.operation for row in history(spark, silver).collect()]
    assert "OPTIMIZE" in operations, operations
    # Every file is younger than the job's 168 hours: VACUUM could delete none, so none ran.
    assert "VACUUM START" not in operations, operations
    printed = local_jobs.runs["maintenance"][0].text.splitlines()
    row = next(line for line in printed if line.startswith("silver/events "))
    assert "no file older than 168 hours to VACUUM" in row, printed


def test_the_exploration_notebook_shows_history_time_travel_changes_progress_plots_and_customers(
    local_jobs,
):
    result = local_jobs.runs["explore"]
    assert result.ok, result.error
    nb = nbformat.read(result.output_path, as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    shown = "\n".join(o.get("text", "") + o.get("data", {}).get("text/html", "") for o in outputs)
    assert "MERGE" in shown and "CREATE TABLE" in shown  # history
    assert "version" in shown and "rows" in shown  # time travel
    assert "Change Data Feed of gold/hourly_product_metrics" in shown
    assert "update_postimage" in shown  # the second delivery updated gold's hours
    assert "bronze_events" in shown and "last_batch_id" in shown  # stream progress
    assert "silver/events_quarantine" in shown and "count" in shown  # quarantine reasons
    # Stream health, quarantine reasons and gold metrics: three plots.
    assert sum("image/png" in o.get("data", {}) for o in outputs) == 3
    # Each purchase with its customer's segment and country at the time (the history's query).
    (history,) = [c for c in nb.cells if "customers_history" in c.source and c.cell_type == "code"]
    table = "".join(o.get("data", {}).get("text/html", "") for o in history.outputs)
    assert "<th>segment</th>" in table and "<th>country</th>" in table, history.outputs


def test_the_backlog_left_once_the_jobs_ran_is_only_maintenance_commits(spark, local_jobs):
    """Every landed file is taken; the source versions a stream has not read are those the
    maintenance job committed after it (OPTIMIZE, VACUUM), which hold no new data, and the
    erasure job's (its deletes, which the streams skip, and the append-only flag lifted)."""
    from medallion.explore import stream_backlog
    from medallion.streams import checkpoint_files
    from medallion.streams.flows import flow
    from medallion.tables import history

    config = local_jobs.config
    backlog = {name: (count, unit) for name, count, unit in stream_backlog(spark, config)}
    assert backlog["bronze_events"] == (0, "file")
    assert {count for count, unit in backlog.values() if unit == "file"} == {0}
    maintained = 0
    for name, (count, unit) in backlog.items():
        if unit != "version" or not count:
            continue
        position = checkpoint_files.delta_position(config.checkpoint(name))
        source = config.table(flow(name).source.key)
        unread = history(spark, source).where(f"version > {position.version}").collect()
        # The erasure's deletes are MERGEs it tags as its own (no id in their condition).
        erased = [r for r in unread if "medallion-erasure" in (r.userMetadata or "")]
        assert {r.operation for r in erased} <= {"MERGE"}
        others = {r.operation for r in unread if r not in erased}
        assert others <= {"OPTIMIZE", "VACUUM START", "VACUUM END", "SET TBLPROPERTIES"}
        maintained += 1
    assert maintained, "maintenance committed to a table a stream reads"


def test_each_notebook_prints_which_medallion_it_loaded(local_jobs):
    """An installed medallion would win over the synced source: the import cell says which."""
    from pathlib import Path

    import medallion

    loaded = f"medallion {medallion.__version__} from {Path(medallion.__file__).parent}"
    runs = [r for name in ("pipeline", "stream", "banking", "iot") for r in local_jobs.runs[name]]
    assert runs and all(r.text.startswith(loaded + "\n") for r in runs), runs[0].text[:300]
    assert local_jobs.runs["explore"].text.startswith(loaded)


def test_the_change_data_notebook_runs_the_flows_it_is_given(local_jobs):
    result = local_jobs.runs["changes"]
    assert result.ok, result.error
    assert "gold/hourly_product_metrics" in result.text


@pytest.mark.parametrize(
    "notebook", ["bronze", "silver", "gold", "changes", "maintenance", "explore"]
)
def test_the_notebooks_are_thin_and_committed_without_outputs(notebook):
    nb = nbformat.read(ROOT / "notebooks" / f"{notebook}.ipynb", as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code)
    assert sum("parameters" in c.metadata.get("tags", []) for c in code) == 1
    assert "import medallion" in code[0].source and '"..", "src"' in code[0].source
    calls = [c for c in code if "parameters" not in c.metadata.get("tags", [])]
    assert all(len(c.source.splitlines()) <= 16 for c in calls), "a notebook cell is a call"


def test_a_failing_task_fails_the_job_run_naming_it_and_skips_what_depends_on_it(tmp_path, capsys):
    command = ["job", "--bundle", str(ROOT), "run", "medallion_pipeline"]
    places = ["--landing", str(tmp_path / "landing"), "--lake", str(tmp_path / "lake")]
    # An unknown trigger fails in the first task, before any Spark session starts.
    code = main([*command, *places, "--param", "trigger=sometimes", "--output", str(tmp_path)])
    assert code == 1
    captured = capsys.readouterr()
    assert "task bronze failed: ConfigError: unknown trigger 'sometimes'" in captured.err
    assert "skipped: silver, gold" in captured.err
    assert "task silver: SKIPPED" in captured.out
    assert (tmp_path / "bronze.ipynb").is_file()
