"""Offline validation of the bundle: schema, paths, dependencies, variables, typed models."""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from decimal import Decimal
from pathlib import Path

import jsonschema
import pytest
import yaml
from bundle_support import ROOT

from medallion.bundle.resolve import (
    LOCAL_TARGET,
    Bundle,
    BundleError,
    short_name,
    task_parameters,
)
from medallion.cli import main
from medallion.deployment import setting, tables_of
from medallion.layers import select_flows
from medallion.pipelines import pipeline_folder, pipelines
from medallion.task_params import TaskParams

# The bundle's files: what every pipeline shares in resources/, and each pipeline's own (its
# jobs, its dashboard) in its package's folder.
PIPELINE_FILES = sorted((ROOT / "src" / "medallion" / "pipelines").glob("*/*.yml"))
BUNDLE_FILES = [
    ROOT / "databricks.yml",
    *sorted((ROOT / "resources").glob("*.yml")),
    *PIPELINE_FILES,
]
# The artifact build's output, which every task installs.
BUILT_WHEEL = ROOT / "dist" / "*.whl"


def _jobs_by_pipeline() -> dict[str, tuple[str, ...]]:
    """Each pipeline's jobs, found by their ``pipeline`` tag: the triggered ones by name, then
    the continuous one. A new pipeline's folder is all it takes to be checked here."""
    found: dict[str, list[tuple[bool, str]]] = {}
    for key, spec in Bundle(ROOT).jobs_spec.items():
        pipeline = (spec.get("tags") or {}).get("pipeline")
        if pipeline:
            found.setdefault(pipeline, []).append(("continuous" in spec, key))
    return {name: tuple(key for _, key in sorted(jobs)) for name, jobs in found.items()}


PIPELINE_JOBS = _jobs_by_pipeline()
LAYER_NOTEBOOKS = {"bronze.ipynb": "bronze", "silver.ipynb": "silver", "gold.ipynb": "gold"}


def schema_errors(schema: dict, document: dict) -> list[str]:
    validator = jsonschema.Draft202012Validator(schema)
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator.iter_errors(document)
    ]


@pytest.mark.parametrize("path", BUNDLE_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_bundle_file_validates_against_the_official_schema(bundle_schema, path):
    document = yaml.safe_load(path.read_text())
    assert schema_errors(bundle_schema, document) == []


@pytest.mark.parametrize("key", sorted(Bundle(ROOT).python_job_keys))
def test_every_job_defined_in_python_validates_against_the_official_schema(bundle_schema, key):
    # Each pipeline's jobs come from its declaration (medallion/pipeline_jobs.py), loaded by
    # the function databricks.yml's `python` section names, as the CLI loads them.
    document = {"resources": {"jobs": {key: Bundle(ROOT).jobs_spec[key]}}}
    assert schema_errors(bundle_schema, document) == []


def test_the_bundle_includes_every_resource_file(bundle):
    assert set(bundle.files) == {p.resolve() for p in BUNDLE_FILES}
    pipeline_jobs = {k for keys in PIPELINE_JOBS.values() for k in keys}
    assert set(bundle.jobs_spec) == {
        *pipeline_jobs,
        "medallion_maintenance",
        "medallion_quarantine_replay",
        "medallion_erase",
    }


def test_a_misspelt_setting_fails_validation(bundle, bundle_schema):
    document = {
        "resources": {"jobs": {"medallion_pipeline": bundle.jobs_spec["medallion_pipeline"]}}
    }
    typo = copy.deepcopy(document)
    task = typo["resources"]["jobs"]["medallion_pipeline"]["tasks"][0]
    task["notebook_taskk"] = task.pop("notebook_task")
    errors = schema_errors(bundle_schema, typo)
    assert any("notebook_taskk" in e for e in errors), errors

    wrong_enum = copy.deepcopy(document)
    wrong_enum["resources"]["jobs"]["medallion_pipeline"]["schedule"]["pause_status"] = "PAWSED"
    assert schema_errors(bundle_schema, wrong_enum)


def test_every_notebook_a_task_names_exists_and_every_dependency_resolves(bundle):
    for target in bundle.targets:
        for job in bundle.jobs(target, user_name="someone@example.com").values():
            order = [t.key for t in job.task_order()]  # raises on unknown or cyclic depends_on
            assert sorted(order) == sorted(t.key for t in job.tasks), job.key
            assert len(set(order)) == len(order), f"{job.key}: duplicate task keys"
            for task in job.tasks:
                if task.kind == "python_wheel_task":
                    _assert_runs_the_wheel(bundle, job, task)
                    continue
                assert task.kind == "notebook_task", f"{job.key}.{task.key}"
                assert task.notebook.is_file(), f"{job.key}.{task.key}: {task.notebook}"
                for library in task.spec.get("libraries", []):
                    # The wheel exists after the artifact build: it must be that build's output.
                    assert list(library) == ["whl"], library
                    assert _from_job_file(bundle, job.key, library["whl"]) == BUILT_WHEEL


def _from_job_file(bundle, job_key: str, relative: str) -> Path:
    """A path a job gives, relative to its file (the bundle root for a Python-defined job), as the
    Databricks CLI reads it."""
    return (bundle.job_sources[job_key].parent / relative).resolve()


def _assert_runs_the_wheel(bundle, job, task) -> None:
    """A wheel task calls an entry point of this package's wheel, which its environment (the
    job's, by key) installs from the artifact build's output."""
    import tomllib

    wheel = task.spec["python_wheel_task"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert wheel["package_name"] == "medallion" and wheel["entry_point"] in scripts
    environments = {e["environment_key"]: e["spec"] for e in job.spec["environments"]}
    (dependency,) = environments[task.spec["environment_key"]]["dependencies"]
    assert _from_job_file(bundle, job.key, dependency) == BUILT_WHEEL


def test_the_wheel_artifact_is_built_with_standard_tooling(bundle):
    artifact = bundle.config["artifacts"]["medallion_wheel"]
    assert artifact["type"] == "whl"
    assert artifact["build"].split()[:3] == ["python3", "-m", "build"]
    assert "--outdir dist" in artifact["build"]
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extra = project["optional-dependencies"]["databricks"]
    assert any(d.startswith("build") for d in extra), "the build tool is declared"


# The CLI versions that the bundle's features need (from the CLI's changelog): dashboards
# placed with dataset_catalog/dataset_schema (0.281), a run_as identity beside a dashboard
# (0.297).
DATASET_PLACEMENT_CLI = (0, 281, 0)
RUN_AS_WITH_DASHBOARD_CLI = (0, 297, 0)


def _least_cli_version(constraint: str) -> tuple[int, ...]:
    """The least version a ``databricks_cli_version`` constraint allows (its ``>=`` bound)."""
    bounds = re.findall(r">=\s*(\d+)\.(\d+)\.(\d+)", constraint)
    assert bounds, f"no lower bound in {constraint!r}"
    return max(tuple(int(part) for part in bound) for bound in bounds)


def declared_resources(bundle, kind: str) -> dict[str, dict]:
    """The resources of one kind (``dashboards``, ``schemas``) that the bundle's files declare."""
    return {
        key: spec or {}
        for data in bundle.files.values()
        for key, spec in ((data.get("resources") or {}).get(kind) or {}).items()
    }


def test_the_cli_version_pin_allows_no_cli_too_old_for_the_bundle(bundle):
    constraint = bundle.config["bundle"]["databricks_cli_version"]
    dashboards = declared_resources(bundle, "dashboards").values()
    needed = (0, 0, 0)
    if any("dataset_catalog" in d or "dataset_schema" in d for d in dashboards):
        needed = max(needed, DATASET_PLACEMENT_CLI)
    if dashboards and any("run_as" in target for target in bundle.targets.values()):
        needed = max(needed, RUN_AS_WITH_DASHBOARD_CLI)
    assert needed == RUN_AS_WITH_DASHBOARD_CLI  # what this bundle uses today
    assert _least_cli_version(constraint) >= needed, constraint
    assert _least_cli_version(">= 0.250.0") < needed  # the pin documented before


def test_the_warehouse_is_given_per_deploy_and_looked_up_in_no_target(bundle):
    warehouse = bundle.declared_variables()["warehouse_id"]
    assert "lookup" not in warehouse and "default" not in warehouse
    for target in bundle.targets:
        assert "warehouse_id" not in (bundle.target(target).get("variables") or {}), target
    given = bundle.variable_values("prod", {"warehouse_id": "abc123"})
    assert given["warehouse_id"] == "abc123"


def test_every_variable_used_is_declared_and_has_a_value_in_every_target(bundle):
    declared = set(bundle.declared_variables())
    used = set()
    for path in BUNDLE_FILES:
        used |= set(re.findall(r"\$\{var\.([A-Za-z0-9_-]+)", path.read_text()))
    python_jobs = json.dumps([bundle.jobs_spec[k] for k in bundle.python_job_keys])
    used |= set(re.findall(r"\$\{var\.([A-Za-z0-9_-]+)", python_jobs))
    assert used - declared == set(), "undeclared variables"
    assert declared - used == set(), "declared but never used"
    for target in bundle.targets:
        bundle.jobs(target, user_name="someone@example.com")  # resolves every reference


def test_an_undeclared_variable_is_a_clear_error(bundle):
    broken = copy.deepcopy(bundle.jobs_spec["medallion_maintenance"])
    broken["parameters"][0]["default"] = "${var.catallog}"
    resolve = bundle.resolver(LOCAL_TARGET)
    with pytest.raises(BundleError, match=r"\$\{var.catallog\} is not declared"):
        resolve(broken, "jobs.medallion_maintenance")


def test_targets_name_and_place_things_as_documented(bundle):
    dev = bundle.jobs("dev", user_name="Jane.Doe@example.com")["medallion_pipeline"]
    assert dev.parameters["catalog"] == "main"
    assert dev.parameters["schema"] == "medallion_jane_doe"
    assert dev.parameters["landing"] == "/Volumes/main/medallion_jane_doe/landing"
    assert dev.parameters["checkpoint_root"] == "/Volumes/main/medallion_jane_doe/lake/_checkpoints"
    assert dev.spec["schedule"]["pause_status"] == "PAUSED"
    assert (
        bundle.deployed_name(dev, "dev", "Jane.Doe@example.com")
        == "[dev jane_doe] medallion_pipeline"
    )
    prod_jobs = bundle.jobs("prod", user_name="sp")
    assert prod_jobs["medallion_pipeline"].spec["schedule"]["pause_status"] == "UNPAUSED"
    assert prod_jobs["medallion_stream"].spec["continuous"]["pause_status"] == "UNPAUSED"
    prod = bundle.targets["prod"]
    assert prod["mode"] == "production" and bundle.targets["dev"]["mode"] == "development"
    assert prod["run_as"] == {"service_principal_name": "${var.service_principal}"}
    assert {p["level"] for p in prod["permissions"]} == {"CAN_MANAGE", "CAN_VIEW"}
    local = bundle.jobs(LOCAL_TARGET)["medallion_pipeline"]
    assert local.parameters["catalog"] == ""
    assert local.parameters["lake"] == str(ROOT / "build" / "demo" / "lake")  # one local lake
    assert local.parameters["file_source"] == "files"


def created_schema(bundle, target: str, schema: str, user_name: str) -> str:
    """The name a deploy gives the schema resource, as the CLI names it: prefixed
    ``dev_<short name>_`` in development mode unless ``skip_name_prefix_for_schema``."""
    skip = (bundle.config.get("experimental") or {}).get("skip_name_prefix_for_schema")
    if bundle.targets[target].get("mode") == "development" and not skip:
        return f"dev_{short_name(user_name)}_{schema}"
    return schema


@pytest.mark.parametrize("target", ["dev", "prod"])
def test_every_path_and_name_points_at_the_schema_the_deploy_creates(bundle, target):
    user = "Jane.Doe@example.com"
    assert declared_resources(bundle, "schemas")["medallion"]["name"] == "${var.schema}"
    for job in bundle.jobs(target, user_name=user).values():
        params = job.parameters
        schema = created_schema(bundle, target, params["schema"], user)
        assert schema == params["schema"], job.key
        for key in ("landing", "checkpoint_root"):
            assert params[key].startswith(f"/Volumes/{params['catalog']}/{schema}/"), (job.key, key)
    for placed in declared_resources(bundle, "dashboards").values():
        assert placed["dataset_schema"] == "${var.schema}"  # the same variable, unprefixed


def placed_dashboards(bundle) -> dict[Path, dict]:
    """Each dashboard resource by the file it deploys, a path relative to the bundle file that
    declares it."""
    return {
        (path.parent / spec["file_path"]).resolve(): spec
        for path, data in bundle.files.items()
        for spec in ((data.get("resources") or {}).get("dashboards") or {}).values()
    }


def test_each_pipeline_with_views_is_a_dashboard_of_the_bundle_generated_from_them(bundle):
    """One Lakeview dashboard per pipeline, beside its package, its file exactly what its
    declared views make."""
    import json

    from medallion.dashboards import dashboard_pipelines, lakeview

    placed = placed_dashboards(bundle)
    expected = {pipeline_folder(p.name) / "dashboard.lvdash.json": p for p in dashboard_pipelines()}
    assert {"retail", "banking", "iot"} <= {p.name for p in expected.values()}
    assert set(placed) == set(expected)
    for path, pipeline in expected.items():
        committed = json.loads(path.read_text())
        assert committed == lakeview(pipeline), "regenerate: python -m medallion.dashboards"
        datasets = {d["name"] for d in committed["datasets"]}
        (page,) = committed["pages"]
        widgets = [item["widget"] for item in page["layout"]]
        used = {q["query"]["datasetName"] for w in widgets for q in w.get("queries", [])}
        assert used == datasets and "stream_health" in datasets
        assert placed[path]["warehouse_id"] == "${var.warehouse_id}"
    banking = json.loads((pipeline_folder("banking") / "dashboard.lvdash.json").read_text())
    kinds = {
        w["widget"]["name"]: w["widget"]["spec"]["widgetType"]
        for w in banking["pages"][0]["layout"]
        if "spec" in w["widget"]
    }
    assert kinds["alert_queue"] == "table"
    iot = json.loads((pipeline_folder("iot") / "dashboard.lvdash.json").read_text())
    chooser = [
        w["widget"] for w in iot["pages"][0]["layout"] if w["widget"]["name"].startswith("choose_")
    ]
    assert [w["spec"]["widgetType"] for w in chooser] == ["filter-single-select"]
    assert chooser[0]["queries"][0]["query"]["datasetName"] == "device_minutes"


def test_the_jobs_have_the_documented_shape(bundle):
    jobs = bundle.jobs("dev", user_name="someone@example.com")
    pipeline, serverless = jobs["medallion_pipeline"], jobs["medallion_pipeline_serverless"]
    assert [(t.key, t.depends_on) for t in pipeline.task_order()] == [
        ("bronze", ()),
        ("silver", ("bronze",)),
        ("gold", ("silver",)),
    ]
    assert pipeline.parameters["trigger"] == "available_now"
    cluster = pipeline.spec["job_clusters"][0]["new_cluster"]
    assert {"spark_version", "node_type_id", "autoscale"} <= set(cluster)
    assert all(t.job_cluster_key == "pipeline_cluster" for t in pipeline.tasks)
    # The serverless variant: the same layers as wheel tasks in the wheel's environment, no
    # compute of its own, and file arrival in the landing volume instead of a schedule.
    layers = [(t.key, t.depends_on, t.notebook.stem) for t in pipeline.tasks]
    wheel = [(t.key, t.depends_on, t.base_parameters["layer"]) for t in serverless.tasks]
    assert wheel == layers
    assert {t.entry_point for t in serverless.tasks} == {"medallion-task"}
    compute = {"job_cluster_key", "new_cluster", "existing_cluster_id", "libraries"}
    assert all(not compute & set(t.spec) for t in serverless.tasks)
    assert "job_clusters" not in serverless.spec and "schedule" not in serverless.spec
    assert serverless.parameters == pipeline.parameters
    arrival = serverless.spec["trigger"]
    assert arrival["file_arrival"]["url"] == serverless.parameters["landing"] + "/"
    assert arrival["file_arrival"]["min_time_between_triggers_seconds"] >= 60
    assert arrival["file_arrival"]["wait_after_last_change_seconds"] >= 60
    assert arrival["pause_status"] == "PAUSED"  # the cron schedule is the default
    # The continuous job: processing-time triggers, no depends_on, no retry policy.
    stream = jobs["medallion_stream"]
    assert stream.continuous and stream.parameters["trigger"] == "processing_time"
    assert all(not t.depends_on and "max_retries" not in t.spec for t in stream.tasks)
    assert jobs["medallion_maintenance"].spec["schedule"]["quartz_cron_expression"]


def test_every_pipeline_has_a_triggered_and_a_continuous_job(bundle):
    """One triggered and one continuous job per pipeline, each of whose tasks runs that
    pipeline only; the new pipelines' jobs take the shared parameters and clusters."""
    jobs = bundle.jobs(LOCAL_TARGET)
    assert set(PIPELINE_JOBS) == {p.name for p in pipelines()}
    shared = jobs["medallion_banking"].parameters
    for pipeline, keys in PIPELINE_JOBS.items():
        assert [jobs[k].continuous for k in keys] == [False] * (len(keys) - 1) + [True]
        for key in keys:
            job = jobs[key]
            for task in job.tasks:
                params = task_parameters(job, task, {})
                assert params["pipeline"] == pipeline, (key, task.key)
                assert params["trigger"] == (
                    "processing_time" if job.continuous else "available_now"
                )
            if pipeline != "retail":
                assert job.parameters == shared
    banking = TaskParams.from_mapping(
        task_parameters(jobs["medallion_banking"], jobs["medallion_banking"].tasks[1], {})
    ).config()
    assert setting(banking, "fraud_risk_score_above") == Decimal("0.8")
    overridden = bundle.jobs(LOCAL_TARGET, overrides={"fraud_risk_score_above": "0.9"})
    silver = overridden["medallion_banking_stream"].tasks[1]
    assert "fraud_risk_score_above=0.9" in silver.base_parameters["settings"]


@pytest.mark.parametrize("job_key", [k for keys in PIPELINE_JOBS.values() for k in keys])
def test_every_flow_runs_in_exactly_one_task(bundle, job_key):
    """A layer task with no ``flows`` runs every flow of its layer of its pipeline; ``flows``
    names them. A flow fused into another runs in that flow's task (streams/fusion.py)."""
    job = bundle.jobs(LOCAL_TARGET)[job_key]
    ran: Counter = Counter()
    for task in job.tasks:
        params = task_parameters(job, task, {})
        (pipeline,) = pipelines([params["pipeline"]])
        names = [n for n in params.get("flows", "").split(",") if n]
        layer = params.get("layer") or LAYER_NOTEBOOKS.get(task.notebook.name)
        if not names:
            assert layer is not None, f"{job_key}.{task.key}: {task.notebook} needs flows"
        selected = select_flows(layer, names, pipeline.flows)  # raises for unknown flows
        ran.update(name for f in selected for name in (f.name, *f.fuses))
    assert {f.name for f in pipeline.flows} - set(ran) == set(), f"flows no task of {job_key} runs"
    assert [n for n, count in ran.items() if count > 1] == [], "flows run by two tasks"


def test_jobs_load_into_the_typed_models_of_databricks_bundles(bundle):
    from databricks.bundles.jobs import Job

    for target in bundle.targets:
        for spec in bundle.job_specs(target).values():
            Job.from_dict(copy.deepcopy(spec))  # unresolved: ${var.*} where values go
        for key, job in bundle.jobs(target, user_name="someone@example.com").items():
            typed = Job.from_dict(copy.deepcopy(job.spec))
            assert [t.task_key for t in typed.tasks] == [t.key for t in job.tasks], key
    broken = copy.deepcopy(bundle.jobs_spec["medallion_pipeline"])
    broken["tasks"][0]["notebook_taskk"] = broken["tasks"][0].pop("notebook_task")
    with pytest.raises(ValueError, match="notebook_taskk"):
        Job.from_dict(broken)


def test_job_list_prints_one_line_per_job_key_first_then_its_tasks(capsys):
    assert main(["job", "--bundle", str(ROOT), "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["job", "tasks,", "in", "order"] and set(lines[1]) == {"-"}
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    layers = ["bronze", "silver", "gold"]
    pipeline_jobs = {k: layers for keys in PIPELINE_JOBS.values() for k in keys}
    assert rows == {
        "medallion_maintenance": ["maintain"],
        "medallion_quarantine_replay": ["replay", "gold"],
        "medallion_erase": ["erase"],
        **pipeline_jobs,
    }
    assert main(["job", "list", "--bundle", str(ROOT), "--output", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {job["job"]: job["tasks"] for job in listed} == rows


def test_job_run_of_an_unknown_job_or_target_is_a_usage_error(capsys):
    assert main(["job", "--bundle", str(ROOT), "run", "nope"]) == 2
    assert "unknown job 'nope'" in capsys.readouterr().err
    assert main(["job", "--bundle", str(ROOT), "list", "--target", "staging"]) == 2
    assert "unknown target 'staging'" in capsys.readouterr().err


def test_a_target_override_merges_tasks_by_key(tmp_path: Path):
    (tmp_path / "databricks.yml").write_text(
        yaml.safe_dump(
            {
                "bundle": {"name": "b"},
                "variables": {"who": {"default": "x"}},
                "resources": {
                    "jobs": {
                        "j": {
                            "name": "j-${var.who}",
                            "tasks": [
                                {"task_key": "a", "notebook_task": {"notebook_path": "a.ipynb"}},
                                {"task_key": "b", "depends_on": [{"task_key": "a"}]},
                            ],
                        }
                    }
                },
                "targets": {
                    "t": {
                        "variables": {"who": "y"},
                        "resources": {
                            "jobs": {"j": {"tasks": [{"task_key": "b", "max_retries": 2}]}}
                        },
                    }
                },
            }
        )
    )
    job = Bundle(tmp_path).job("j", "t")
    assert job.name == "j-y"
    assert [t.key for t in job.tasks] == ["a", "b"]
    assert job.task("b").spec == {
        "task_key": "b",
        "depends_on": [{"task_key": "a"}],
        "max_retries": 2,
    }
    assert job.task("a").notebook == (tmp_path / "a.ipynb").resolve()


def _widgets_made(namespace: dict) -> dict[str, str]:
    """The text widgets ``notebook_params`` makes on Databricks, recorded as ``dbutils``
    would hold them, with their defaults."""
    from types import SimpleNamespace

    from medallion.task_params import notebook_params

    made: dict[str, str] = {}
    widgets = SimpleNamespace(text=made.__setitem__, get=made.__getitem__)
    notebook_params({**namespace, "dbutils": SimpleNamespace(widgets=widgets)})
    return made


KAFKA_PARAMETERS = (
    "source",
    "kafka_bootstrap",
    "events_topic",
    "customers_topic",
    "starting_offsets",
    "max_offsets_per_trigger",
    "kafka_secret_scope",
)


@pytest.mark.parametrize(
    "job_key", ["medallion_pipeline", "medallion_pipeline_serverless", "medallion_stream"]
)
def test_kafka_options_are_job_parameters_and_credentials_a_secret_scope(bundle, job_key):
    """Each job that runs bronze takes the Kafka options as parameters, and every parameter is
    one the notebooks read; the credentials appear only as the name of a secret scope."""
    from dataclasses import fields

    from medallion.source_options import KafkaSourceOptions
    from medallion.task_params import TaskParams

    job = bundle.jobs("prod")[job_key]
    from medallion.pipelines import all_datasets

    # Every notebook makes a widget of every parameter and of every dataset's topic, whatever
    # its parameters cell holds.
    task_fields = {f.name for f in fields(TaskParams)} | {f"{d}_topic" for d in all_datasets()}
    assert set(KAFKA_PARAMETERS) <= set(job.parameters)
    assert set(job.parameters) <= task_fields, "a job parameter no notebook reads"
    assert set(_widgets_made({"lake": "/tmp/lake"})) == task_fields
    assert job.parameters["source"] == "files"
    assert job.parameters["kafka_secret_scope"] == "medallion-kafka"
    credential = re.compile(r"password|username|secret|token|jaas|truststore", re.IGNORECASE)
    assert [n for n in job.parameters if credential.search(n)] == ["kafka_secret_scope"]
    # Switching a deployment to Kafka is a matter of two parameters.
    switched = {**job.parameters, "source": "kafka", "kafka_bootstrap": "broker-1:9093"}
    config = TaskParams.from_mapping(switched).config()
    assert config.source == "kafka"
    assert config.kafka == KafkaSourceOptions(
        bootstrap_servers="broker-1:9093", secret_scope="medallion-kafka"
    )
    renamed = {**switched, "customers_topic": "crm.changes"}
    assert TaskParams.from_mapping(renamed).config().kafka.topic("customers") == "crm.changes"


def test_prod_deploys_under_the_principals_own_folder_and_no_host_is_a_variable(bundle):
    root = bundle.targets["prod"]["workspace"]["root_path"]
    assert root.startswith("/Workspace/Users/${workspace.current_user.userName}/")
    for name, target in {"(top level)": bundle.config, **bundle.targets}.items():
        host = ((target or {}).get("workspace") or {}).get("host", "")
        assert "${" not in host, f"{name}: the CLI refuses variables in workspace.host"
    assert bundle.targets["dev"]["presets"]["artifacts_dynamic_version"] is True


def test_the_first_deploy_creates_the_schema_and_volumes_the_jobs_use(bundle):
    resources = bundle.files[ROOT / "resources" / "medallion_schema.yml"]["resources"]
    schema = resources["schemas"]["medallion"]
    assert schema == {**schema, "catalog_name": "${var.catalog}", "name": "${var.schema}"}
    resolve = bundle.resolver("dev", user_name="jane@example.com")
    for volume in ("landing", "lake"):
        spec = resources["volumes"][volume]
        assert spec["schema_name"] == "${resources.schemas.medallion.name}"
        # The job parameters name exactly this volume's path.
        path = resolve(f"/Volumes/{spec['catalog_name']}/${{var.schema}}/{spec['name']}", volume)
        assert resolve(f"${{var.{volume}}}", volume) == path


def test_every_job_has_a_timeout_or_health_rules_and_notifications(bundle):
    jobs = bundle.jobs("prod", user_name="sp")
    for key, job in jobs.items():
        spec = job.spec
        streaming = "continuous" in spec
        metrics = {rule["metric"] for rule in spec["health"]["rules"]}
        events = (
            "on_streaming_backlog_exceeded"
            if streaming
            else "on_duration_warning_threshold_exceeded"
        )
        for kind in ("email_notifications", "webhook_notifications"):
            assert set(spec[kind]) == {"on_failure", events}, f"{key}: {kind}"
        if streaming:
            assert metrics == {"STREAMING_BACKLOG_SECONDS", "STREAMING_BACKLOG_FILES"}, key
        else:
            assert metrics == {"RUN_DURATION_SECONDS"}, key
            assert int(spec["timeout_seconds"]) > 0, key
    # Each is a variable: an address given once reaches every job.
    tuned = bundle.jobs("prod", overrides={"notification_emails": ["oncall@example.com"]})
    assert all(
        job.spec["email_notifications"]["on_failure"] == ["oncall@example.com"]
        for job in tuned.values()
    )


def test_a_complex_variable_may_not_refer_to_another(tmp_path):
    from medallion.bundle.resolve import Bundle, BundleError

    (tmp_path / "databricks.yml").write_text(
        "bundle: {name: b}\n"
        "variables:\n"
        "  emails: {type: complex, default: [a@example.com]}\n"
        "  notify: {type: complex, default: {on_failure: '${var.emails}'}}\n"
        "targets: {local: {default: true}}\n"
        "resources:\n"
        "  jobs:\n"
        "    j: {name: j, email_notifications: '${var.notify}', tasks: []}\n"
    )
    with pytest.raises(BundleError, match="complex variables cannot contain references"):
        Bundle(tmp_path).jobs("local")


def test_a_notebook_opened_by_hand_on_databricks_defaults_to_the_dev_targets_places(monkeypatch):
    """Widgets start from the developer's own schema and volumes, not the laptop's paths."""
    from types import SimpleNamespace

    from medallion.task_params import notebook_params

    monkeypatch.chdir(ROOT / "notebooks")  # where Databricks runs a notebook of the bundle
    made: dict[str, str] = {}
    user = SimpleNamespace(get=lambda: "Jane.Doe@example.com")
    context = SimpleNamespace(userName=lambda: user)
    entry = SimpleNamespace(
        getDbutils=lambda: SimpleNamespace(
            notebook=lambda: SimpleNamespace(getContext=lambda: context)
        )
    )
    dbutils = SimpleNamespace(
        widgets=SimpleNamespace(text=made.__setitem__, get=made.__getitem__),
        notebook=SimpleNamespace(entry_point=entry),
    )
    laptop = {"landing": "../build/demo/landing", "lake": "../build/demo/lake"}
    params = notebook_params({**laptop, "dbutils": dbutils})
    assert (params.catalog, params.schema) == ("main", "medallion_jane_doe")
    assert params.landing == "/Volumes/main/medallion_jane_doe/landing"
    assert made["lake"] == "/Volumes/main/medallion_jane_doe/lake"
    assert made["file_source"] == "autoloader"


def test_prod_pins_its_workspace_host_as_a_literal_url(bundle):
    """A deploy from a profile of another workspace fails instead of landing there: prod names
    its host, a literal (the CLI refuses variables there); dev and local follow the profile."""
    host = bundle.targets["prod"]["workspace"]["host"]
    assert re.fullmatch(r"https://[a-z0-9.-]+\.databricks\.com", host)
    for name in ("dev", LOCAL_TARGET):
        assert "host" not in (bundle.targets[name].get("workspace") or {})


def test_prod_grants_what_each_principal_needs_and_readers_gold_alone(bundle):
    """The service principal creates, reads and changes the tables and files; the operators
    manage everything; the readers may use the schema and read the gold tables only."""
    from medallion.config import Config
    from medallion.tables import reader_grants

    resources = bundle.files[ROOT / "resources" / "medallion_schema.yml"]["resources"]
    assert resources["schemas"]["medallion"]["grants"] == "${var.schema_grants}"
    assert {v["grants"] for v in resources["volumes"].values()} == {"${var.volume_grants}"}
    prod = bundle.targets["prod"]["variables"]
    sp, operators, readers = (
        "${var.service_principal}",
        "${var.operators_group}",
        "${var.readers_group}",
    )

    def granted(grants: list[dict]) -> dict[str, set[str]]:
        return {g["principal"]: set(g["privileges"]) for g in grants}

    assert granted(prod["schema_grants"]) == {
        sp: {"USE_SCHEMA", "CREATE_TABLE", "SELECT", "MODIFY"},
        operators: {"ALL_PRIVILEGES", "MANAGE"},
        readers: {"USE_SCHEMA"},  # SELECT on the schema would open bronze and silver
    }
    assert granted(prod["volume_grants"]) == {
        sp: {"READ_VOLUME", "WRITE_VOLUME"},
        operators: {"ALL_PRIVILEGES", "MANAGE"},
    }
    # Elsewhere the deploying user owns the schema and grants nothing.
    variables = bundle.config["variables"]
    assert variables["schema_grants"]["default"] == variables["volume_grants"]["default"] == []
    for name in ("dev", LOCAL_TARGET):
        assert not {"schema_grants", "volume_grants"} & set(bundle.targets[name]["variables"])
    # The readers group reaches every pipeline's jobs as the parameter `readers`, and a run
    # grants it SELECT on exactly the gold tables.
    jobs = bundle.jobs("prod", user_name="sp")
    runs_pipelines = [job for key, job in jobs.items() if key != "medallion_maintenance"]
    assert {job.parameters.get("readers") for job in runs_pipelines} == {"medallion-readers"}
    assert (
        bundle.jobs("dev", user_name="jane@example.com")["medallion_pipeline"].parameters["readers"]
        == ""
    )
    config = TaskParams.from_mapping(jobs["medallion_pipeline"].parameters).config()
    assert config.readers == "medallion-readers"
    statements = reader_grants(config)
    gold = [t.qualified_name for t in tables_of(config) if t.layer == "gold"]
    assert statements == [f"GRANT SELECT ON TABLE {t} TO `medallion-readers`" for t in gold]
    assert gold and all("`gold_" in t for t in gold)
    local = Config(landing="/l", lake="/l", readers="medallion-readers")
    assert reader_grants(local) == []  # path tables: nothing to grant


def test_notebooks_on_serverless_install_medallion_as_the_serverless_job_does(bundle):
    """Interactive serverless compute installs a notebook's environment before its first cell:
    medallion from the bundle's root (editable, with its dependencies), on the environment
    version of the serverless job's own environment."""
    import nbformat
    import tomllib

    serverless = bundle.jobs("dev", user_name="jane@example.com")["medallion_pipeline_serverless"]
    (environment,) = serverless.spec["environments"]
    version = environment["spec"]["environment_version"]
    root = ROOT / "notebooks" / ".."
    assert tomllib.loads((root / "pyproject.toml").read_text())["project"]["name"] == "medallion"
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        notebook = nbformat.read(path, as_version=4).metadata
        databricks = notebook["application/vnd.databricks.v1+notebook"]
        assert databricks["environmentMetadata"] == {
            "base_environment": "",
            "dependencies": ["--editable .."],
            "environment_version": version,
        }, path.name
        assert databricks["notebookName"] == path.stem
