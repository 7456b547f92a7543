"""A run's options are defined once (medallion/run_options.py): `medallion run`'s flags,
TaskParams' fields and the bundle's pipeline job parameters each take exactly the options the
definition gives them, with its defaults, so none of the three gains or loses one alone."""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path

import pytest

from medallion.bundle.resolve import Bundle
from medallion.cli import build_parser
from medallion.pipelines import all_datasets
from medallion.run_options import RUN_OPTIONS, flag_help, run_option
from medallion.task_params import TaskParams

ROOT = Path(__file__).resolve().parents[2]
# The options that are task parameters, with their defaults.
PARAMETERS = {o.name: o.default for o in RUN_OPTIONS if o.parameter}
# How `medallion run` prints, not what it runs.
PRESENTATION_FLAGS = {"-h", "--help", "-v", "--verbose", "--no-live", "--output"}


def _run_flags() -> dict[str, argparse.Action]:
    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    run = commands.choices["run"]
    return {flag: action for action in run._actions for flag in action.option_strings}


def test_every_run_flag_is_a_declared_option_and_every_declared_flag_exists():
    flags = set(_run_flags()) - PRESENTATION_FLAGS
    topics = {f"--{d.replace('_', '-')}-topic" for d in all_datasets()}
    assert topics <= flags  # one flag per dataset stands for the `topics` option
    declared = {o.flag for o in RUN_OPTIONS if o.flag}
    assert flags - topics == declared - {"--<dataset>-topic"}


def test_the_flags_help_and_defaults_are_the_definitions():
    flags = _run_flags()
    for option in RUN_OPTIONS:
        shared = ("--pipeline", "--set", "--carry-column")  # worded for every command
        if option.flag in (None, "--<dataset>-topic", "--stream", *shared):
            continue
        if option.flag == "--kafka-accept-data-loss":
            continue  # the flag says the opposite of the parameter
        assert flags[option.flag].help.startswith(flag_help(option.flag)), option.flag
    for name in ("source", "starting_offsets"):
        assert flags[run_option(name).flag].default == run_option(name).default


def test_task_params_are_the_options_that_are_task_parameters_with_their_defaults():
    assert {f.name: f.default for f in fields(TaskParams)} == PARAMETERS


def test_the_bundle_gives_every_pipeline_job_the_options_it_sets_from_variables():
    bundle = Bundle(ROOT)
    variables = bundle.declared_variables()
    job_parameters = variables["pipeline_job_parameters"]["default"]
    given = {p["name"]: p["default"] for p in job_parameters}
    wanted = {o.name: f"${{var.{o.variable}}}" for o in RUN_OPTIONS if o.variable}
    assert given == wanted
    for option in RUN_OPTIONS:
        if option.variable:
            assert option.parameter, option.name
            assert variables[option.variable].get("description"), option.variable
    # Each pipeline job takes the options the variables give (all of them, from those
    # variables), names its pipeline, and sets nothing that is not a task parameter.
    per_job = {o.name for o in RUN_OPTIONS if o.parameter and not o.variable}
    assert per_job == {"pipeline", "settings", "flows", "trigger"}
    topics = {f"{d}_topic" for d in all_datasets()}
    for key, spec in bundle.jobs_spec.items():
        if not (spec.get("tags") or {}).get("pipeline"):
            continue
        listed = spec["parameters"]
        if listed == "${var.pipeline_job_parameters}":
            listed = job_parameters
        job = {p["name"]: p["default"] for p in listed}
        given_here = {n: v for n, v in job.items() if n in wanted}
        if "continuous" not in spec:  # how often a stream looks: the continuous job's to give
            given_here.setdefault("interval_seconds", wanted["interval_seconds"])
        assert given_here == wanted, key
        named = dict(job)
        for task in spec["tasks"]:
            for kind in ("notebook_task", "python_wheel_task"):
                task_spec = task.get(kind) or {}
                named |= task_spec.get("base_parameters") or {}
                named |= task_spec.get("named_parameters") or {}
        assert "pipeline" in named, key
        assert set(named) <= set(PARAMETERS) | topics | {"layer"}, key


def test_a_wheel_tasks_arguments_are_its_parameters_and_nothing_else():
    from medallion.errors import ConfigError
    from medallion.layers import task_arguments

    given = ["--layer=gold", "--lake=/l", "--flows=", "--events_topic=shop.clicks"]
    assert task_arguments(given) == {
        "layer": "gold",
        "lake": "/l",
        "flows": "",
        "events_topic": "shop.clicks",
    }
    for wrong in (["--lakes=/l"], ["lake=/l"], ["--lake"]):
        with pytest.raises(ConfigError, match="task parameter"):
            task_arguments(wrong)
