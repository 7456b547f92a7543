"""Each pipeline's jobs, derived from its declaration: nothing to copy for a new pipeline.

Every pipeline of a package folder (src/medallion/pipelines/<name>/) gets two jobs with one
notebook task per layer, each running that layer's flows of the pipeline: a triggered job
(``medallion_<name>``: available-now, on the cron schedule, on an autoscaling job cluster) and a
continuous one (``medallion_<name>_stream``: processing-time triggers, a fixed-size cluster).
Their parameters, clusters, health rules and notifications are the shared variables of
``databricks.yml``. What is a pipeline's own is declared in its folder's ``jobs.py`` as
``JOBS = PipelineJobs(...)``: the jobs' names and descriptions, the bundle variables given to
its flows as settings, retail's job-level parameters and its serverless job. A folder with no
``jobs.py`` gets the defaults.

The Databricks CLI loads these jobs through ``databricks.yml``'s ``python`` section
(medallion/bundle/python_resources.py), and so does ``medallion job list`` / ``job run``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from medallion.pipelines import pipeline_folder, pipelines
from medallion.run_options import RUN_OPTIONS

LAYERS = ("bronze", "silver", "gold")
# Paths in Python-defined resources are relative to the bundle root (databricks.yml's folder).
NOTEBOOK = "notebooks/{layer}.ipynb"
WHEEL = "dist/*.whl"


@dataclass(frozen=True)
class PipelineJobs:
    """What a pipeline's jobs have of their own; every field has a default.

    ``triggered`` and ``streaming`` are the jobs' keys and names (``medallion_<pipeline>``,
    ``medallion_<pipeline>_stream`` by default). ``settings`` names bundle variables the tasks
    pass to the flows in their ``settings`` parameter (``name=${var.name}``; the variables are
    declared in a YAML file of the pipeline's folder). ``job_parameters`` puts the pipeline,
    the trigger and these datasets' topics (``<dataset>_topic``) among the job's parameters,
    where ``--params`` can change them, instead of in the tasks'. ``task_descriptions`` are the
    triggered job's tasks', by layer. ``serverless`` is the key of a third job: the triggered
    layers as wheel tasks on serverless compute, run when files land.
    """

    triggered: str = ""
    streaming: str = ""
    description: str = ""
    stream_description: str = ""
    settings: tuple[str, ...] = ()
    job_parameters: tuple[str, ...] | None = None
    task_descriptions: Mapping[str, str] = field(default_factory=dict)
    serverless: str | None = None
    serverless_description: str = ""


def declared_jobs(name: str) -> PipelineJobs:
    """The ``JOBS`` of the pipeline's folder's ``jobs.py``; the defaults without one."""
    folder = pipeline_folder(name)
    if folder is None or not (folder / "jobs.py").is_file():
        return PipelineJobs()
    module = importlib.import_module(f"medallion.pipelines.{folder.name}.jobs")
    return getattr(module, "JOBS", PipelineJobs())


def job_specs() -> dict[str, dict]:
    """Every job of every pipeline of a package folder, by key, as bundle YAML would hold them."""
    specs: dict[str, dict] = {}
    for pipeline in pipelines():
        if pipeline_folder(pipeline.name) is not None:
            specs |= pipeline_job_specs(pipeline.name, declared_jobs(pipeline.name))
    return specs


def pipeline_job_specs(name: str, jobs: PipelineJobs) -> dict[str, dict]:
    """The jobs of the pipeline ``name``, by key."""
    triggered = jobs.triggered or f"medallion_{name}"
    streaming = jobs.streaming or f"medallion_{name}_stream"
    specs = {
        triggered: _triggered(name, jobs, triggered),
        streaming: _streaming(name, jobs, streaming),
    }
    if jobs.serverless:
        specs[jobs.serverless] = _serverless(name, jobs)
    return specs


def _common(name: str, key: str, description: str, streaming: bool) -> dict:
    warning = (
        "on_streaming_backlog_exceeded" if streaming else "on_duration_warning_threshold_exceeded"
    )
    return {
        "name": key,
        "description": description,
        "tags": {"project": "medallion", "pipeline": name},
        "health": "${var.streaming_health}" if streaming else "${var.triggered_health}",
        "email_notifications": {
            "on_failure": "${var.notification_emails}",
            warning: "${var.notification_emails}",
        },
        "webhook_notifications": {
            "on_failure": "${var.notification_webhooks}",
            warning: "${var.notification_webhooks}",
        },
    }


def _parameters(name: str, jobs: PipelineJobs, trigger: str) -> str | list[dict]:
    """The job's parameters: the shared variable, or (``job_parameters``) the pipeline's own
    list, with the pipeline, the trigger and its datasets' topics among them."""
    if jobs.job_parameters is None:
        return "${var.pipeline_job_parameters}"
    listed = {"pipeline": name, "trigger": trigger}
    for option in RUN_OPTIONS:
        # How often a stream looks is the continuous job's to give.
        if option.variable and (trigger != "available_now" or option.name != "interval_seconds"):
            listed[option.name] = f"${{var.{option.variable}}}"
    for dataset in jobs.job_parameters:
        listed[f"{dataset}_topic"] = f"${{var.{dataset}_topic}}"
    return [{"name": k, "default": v} for k, v in listed.items()]


def _task_parameters(name: str, jobs: PipelineJobs, trigger: str) -> dict[str, str]:
    if jobs.job_parameters is not None:
        return {}
    given = {"pipeline": name, "trigger": trigger}
    if jobs.settings:
        given["settings"] = ", ".join(f"{s}=${{var.{s}}}" for s in jobs.settings)
    return given


def _notebook_tasks(name: str, jobs: PipelineJobs, cluster: str, triggered: bool) -> list[dict]:
    trigger = "available_now" if triggered else "processing_time"
    parameters = _task_parameters(name, jobs, trigger)
    tasks = []
    for index, layer in enumerate(LAYERS):
        task: dict = {"task_key": layer}
        if triggered and layer in jobs.task_descriptions:
            task["description"] = jobs.task_descriptions[layer]
        if triggered and index:
            # A continuous job allows no depends_on: its streams wait for upstream commits.
            task["depends_on"] = [{"task_key": LAYERS[index - 1]}]
        task["job_cluster_key"] = cluster
        task["notebook_task"] = {"notebook_path": NOTEBOOK.format(layer=layer)}
        if parameters:
            task["notebook_task"]["base_parameters"] = dict(parameters)
        task["libraries"] = [{"whl": WHEEL}]
        if triggered:
            task["max_retries"] = 1  # safe: every write is idempotent
        tasks.append(task)
    return tasks


def _triggered(name: str, jobs: PipelineJobs, key: str) -> dict:
    description = jobs.description or f"The {name} flows, bronze -> silver -> gold, available-now."
    return {
        **_common(name, key, description, streaming=False),
        "schedule": {
            "quartz_cron_expression": "${var.pipeline_schedule}",
            "timezone_id": "UTC",
            "pause_status": "${var.pause_status}",
        },
        "max_concurrent_runs": 1,  # runs share checkpoints
        "timeout_seconds": "${var.job_timeout_seconds}",
        "parameters": _parameters(name, jobs, "available_now"),
        "job_clusters": [
            {"job_cluster_key": "pipeline_cluster", "new_cluster": "${var.triggered_cluster}"}
        ],
        "tasks": _notebook_tasks(name, jobs, "pipeline_cluster", triggered=True),
    }


def _streaming(name: str, jobs: PipelineJobs, key: str) -> dict:
    description = (
        jobs.stream_description
        or f"The {name} flows streaming side by side (processing-time triggers)."
    )
    return {
        **_common(name, key, description, streaming=True),
        "continuous": {"pause_status": "${var.pause_status}", "task_retry_mode": "ON_FAILURE"},
        "parameters": _parameters(name, jobs, "processing_time"),
        "job_clusters": [
            {"job_cluster_key": "stream_cluster", "new_cluster": "${var.streaming_cluster}"}
        ],
        "tasks": _notebook_tasks(name, jobs, "stream_cluster", triggered=False),
    }


def _serverless(name: str, jobs: PipelineJobs) -> dict:
    """The triggered layers as wheel tasks (the wheel's ``medallion-task`` entry point) on
    serverless compute, started by files landing (paused by default); never run at once with
    the triggered job: they share checkpoints."""
    description = jobs.serverless_description or f"The {name} layers on serverless compute."
    parameters = _task_parameters(name, jobs, "available_now")
    tasks = []
    for index, layer in enumerate(LAYERS):
        task: dict = {"task_key": layer}
        if index:
            task["depends_on"] = [{"task_key": LAYERS[index - 1]}]
        task["environment_key"] = "medallion"
        task["python_wheel_task"] = {
            "package_name": "medallion",
            "entry_point": "medallion-task",
            "named_parameters": {**parameters, "layer": layer},
        }
        task["max_retries"] = 1
        tasks.append(task)
    common = _common(name, str(jobs.serverless), description, streaming=False)
    return {
        **common,
        "max_concurrent_runs": 1,
        # STANDARD starts slower and costs less; PERFORMANCE_OPTIMIZED starts fast.
        "performance_target": "STANDARD",
        "trigger": {
            "pause_status": "${var.file_arrival_pause_status}",
            "file_arrival": {
                "url": "${var.landing}/",
                "min_time_between_triggers_seconds": "${var.file_arrival_min_seconds}",
                "wait_after_last_change_seconds": "${var.file_arrival_quiet_seconds}",
            },
        },
        "environments": [
            {
                "environment_key": "medallion",
                "spec": {"environment_version": "3", "dependencies": [WHEEL]},
            }
        ],
        "timeout_seconds": "${var.job_timeout_seconds}",
        "parameters": _parameters(name, jobs, "available_now"),
        # No job_clusters: the tasks run on serverless.
        "tasks": tasks,
    }
