"""Each pipeline's jobs are derived from its declaration (medallion/pipeline_jobs.py), not
copied: no pipeline folder holds a job file, the derived jobs are the ones the job files
described (tests/data/jobs/jobs_before_issue_66.yml, captured once), and a pipeline with no
``jobs.py`` gets the default pair."""

from __future__ import annotations

from pathlib import Path

import yaml
from bundle_support import ROOT

from medallion.bundle.resolve import Bundle
from medallion.pipeline_jobs import PipelineJobs, pipeline_job_specs

BEFORE = ROOT / "tests" / "data" / "jobs" / "jobs_before_issue_66.yml"
PIPELINES = ROOT / "src" / "medallion" / "pipelines"


def _comparable(spec: object) -> object:
    """``spec`` with each list of job parameters in name order (the order is the UI's only)."""
    if isinstance(spec, dict):
        return {
            key: sorted(map(_comparable, value), key=lambda p: p["name"])
            if key == "parameters" and isinstance(value, list)
            else _comparable(value)
            for key, value in spec.items()
        }
    if isinstance(spec, list):
        return [_comparable(item) for item in spec]
    return spec


def test_no_pipeline_folder_holds_a_job_file():
    assert sorted(p.relative_to(ROOT).as_posix() for p in PIPELINES.rglob("*.job.yml")) == []


def test_the_derived_jobs_are_those_the_job_files_described():
    before = yaml.safe_load(BEFORE.read_text())
    # The one change: retail's job clusters are the shared ones (databricks.yml's
    # triggered_cluster and streaming_cluster) like every other pipeline's, which adds the
    # erasure key's names to their environment (MEDALLION_ERASURE_KEY_SCOPE/_NAME) as job
    # clusters are meant to have since issue 65.
    for key, cluster in (("medallion_pipeline", "triggered"), ("medallion_stream", "streaming")):
        (job_cluster,) = before[key]["job_clusters"]
        assert "spark_env_vars" not in job_cluster["new_cluster"]
        job_cluster["new_cluster"] = f"${{var.{cluster}_cluster}}"
    bundle = Bundle(ROOT)
    derived = {key: bundle.jobs_spec[key] for key in bundle.python_job_keys}
    assert sorted(derived) == sorted(before)
    for key, spec in before.items():
        assert _comparable(derived[key]) == _comparable(spec), key
        # Their relative paths are the bundle root's, as the CLI reads Python-defined jobs'.
        assert bundle.job_sources[key] == ROOT / "databricks.yml"


def test_a_pipeline_without_jobs_py_gets_a_triggered_and_a_continuous_job():
    specs = pipeline_job_specs("sensors", PipelineJobs())
    assert sorted(specs) == ["medallion_sensors", "medallion_sensors_stream"]
    triggered, streaming = specs["medallion_sensors"], specs["medallion_sensors_stream"]
    assert triggered["tags"] == {"project": "medallion", "pipeline": "sensors"}
    assert [t["task_key"] for t in triggered["tasks"]] == ["bronze", "silver", "gold"]
    assert triggered["tasks"][0]["notebook_task"]["base_parameters"] == {
        "pipeline": "sensors",
        "trigger": "available_now",
    }
    assert "continuous" in streaming and "schedule" not in streaming
    assert all("depends_on" not in t for t in streaming["tasks"])


def test_the_settings_a_pipeline_passes_are_variables_of_its_folder():
    bundle = Bundle(ROOT)
    declared = bundle.declared_variables()
    settings = bundle.jobs_spec["medallion_banking"]["tasks"][0]["notebook_task"]
    for variable in ("fraud_average_multiple", "fraud_new_account_amount"):
        assert f"{variable}=${{var.{variable}}}" in settings["base_parameters"]["settings"]
        assert declared[variable]["description"], variable
    assert Path(PIPELINES / "banking" / "variables.yml").resolve() in bundle.files
