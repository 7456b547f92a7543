"""``medallion run``'s Delta source flags map onto DeltaSourceOptions (no Spark needed)."""

from __future__ import annotations

import logging
import re

import pytest

from medallion.cli import build_parser
from medallion.run_command import delta_source_options_from_args
from medallion.source_options import DeltaSourceOptions

RUN = ["run", "--landing", "/tmp/landing", "--lake", "/tmp/lake"]


def _options(*flags: str) -> DeltaSourceOptions:
    return delta_source_options_from_args(build_parser().parse_args([*RUN, *flags]))


def test_without_flags_the_defaults_skip_change_commits_only():
    assert _options() == DeltaSourceOptions()
    assert _options().as_options() == {"skipChangeCommits": "true"}


def test_every_flag_sets_its_option():
    options = _options(
        "--starting-version",
        "3",
        "--delta-max-files-per-trigger",
        "1",
        "--delta-max-bytes-per-trigger",
        "512m",
        "--no-skip-change-commits",
        "--with-event-time-order",
    )
    assert options == DeltaSourceOptions(
        starting_version=3,
        max_files_per_trigger=1,
        max_bytes_per_trigger="512m",
        skip_change_commits=False,
        with_event_time_order=True,
    )
    assert options.as_options() == {
        "startingVersion": "3",
        "maxFilesPerTrigger": "1",
        "maxBytesPerTrigger": "512m",
        "withEventTimeOrder": "true",
    }
    timestamp = _options("--starting-timestamp", "2026-11-20T10:00:00Z")
    assert timestamp.as_options()["startingTimestamp"] == "2026-11-20T10:00:00Z"


def test_starting_version_latest_warns_without_stream(caplog):
    with caplog.at_level(logging.WARNING, logger="medallion"):
        assert _options("--starting-version", "latest", "--stream").starting_version == "latest"
        assert not caplog.records
        assert _options("--starting-version", "latest").starting_version == "latest"
    assert "reads nothing" in caplog.text


@pytest.mark.parametrize(
    "flags",
    [
        ["--starting-version", "1", "--starting-timestamp", "2026-11-20"],  # one start only
        ["--starting-version", "-1"],
        ["--starting-version", "first"],
        ["--delta-max-files-per-trigger", "0"],
        ["--delta-max-bytes-per-trigger", "0"],
        ["--delta-max-bytes-per-trigger", "lots"],
        ["--delta-max-bytes-per-trigger", "1.5g"],
    ],
)
def test_invalid_flags_are_refused(flags, capsys):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args([*RUN, *flags])
    assert exit_info.value.code == 2
    assert flags[0] in capsys.readouterr().err


def test_each_declared_dataset_gets_a_topic_flag_and_a_size_flag():
    """The flags naming a dataset come from the declarations: a pipeline's datasets get theirs
    without a line of the CLI changing."""
    import sys
    from pathlib import Path

    from medallion.pipelines import registered
    from medallion.run_command import topic_arguments

    kafka = ["run", "--lake", "/l", "--source", "kafka", "--kafka-bootstrap", "h:1"]
    args = build_parser().parse_args([*kafka, "--transactions-topic", "bank.tx"])
    topics = topic_arguments(args)
    assert topics["transactions"] == "bank.tx" and topics["events"] == "events"
    generate = build_parser().parse_args(["generate", "--landing", "/l", "--device-readings", "7"])
    assert (generate.records, generate.size_device_readings, generate.size_events) == (
        1000,
        7,
        None,
    )

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "pipelines"))
    try:
        from meters import METERS

        with registered(METERS):
            args = build_parser().parse_args([*kafka, "--meter-readings-topic", "plant.meters"])
            assert topic_arguments(args)["meter_readings"] == "plant.meters"
    finally:
        sys.path.pop(0)


def _parsers(parser, path=("medallion",)):
    """Every parser of the CLI, with its command path."""
    import argparse

    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _parsers(child, (*path, name))


def test_every_flag_of_every_command_has_help_and_help_has_examples_not_the_docstring():
    from medallion import cli

    parsers = list(_parsers(build_parser()))
    assert len(parsers) > 10
    for path, parser in parsers:
        for action in parser._actions:
            if action.option_strings:
                assert action.help, f"{' '.join(path)} {action.option_strings[0]} has no help"
        text = parser.format_help()
        assert "example" in text, f"{' '.join(path)} --help has no example"
        assert (cli.__doc__ or "").strip() not in text
    run_help = dict(parsers)[("medallion", "run")].format_help()
    assert "--interval INTERVAL" in run_help and "(default: 0.5)" in run_help


def test_global_flags_work_in_any_position_and_version_prints(capsys):
    args = build_parser().parse_args(["run", "--landing", "in", "--lake", "lake", "-v"])
    assert args.verbose is True
    assert build_parser().parse_args(["-v", "status", "--lake", "x"]).verbose is True
    assert build_parser().parse_args(["status", "--lake", "x"]).verbose is False
    job = build_parser().parse_args(["job", "list", "--bundle", "/b"])
    assert job.bundle == "/b"
    assert build_parser().parse_args(["job", "--bundle", "/c", "list"]).bundle == "/c"
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("medallion ")


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--lake", "l", "--landing", "i", "--interval", "0"],
        ["run", "--lake", "l", "--landing", "i", "--interval", "-1"],
        ["run", "--lake", "l", "--landing", "i", "--max-files-per-trigger", "0"],
        ["run", "--lake", "l", "--max-offsets-per-trigger", "-5"],
        ["generate", "--landing", "i", "--files", "0"],
        ["generate", "--landing", "i", "--records", "0"],
        ["generate", "--landing", "i", "--late-rate", "1.5"],
        ["show", "--lake", "l", "--rows", "0"],
        ["changes", "--lake", "l", "--from-version", "-1"],
    ],
)
def test_a_zero_or_negative_bound_is_exit_2_with_a_message(argv, capsys):
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(argv)
    assert done.value.code == 2
    assert "must be" in capsys.readouterr().err


def test_lake_and_landing_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("MEDALLION_LAKE", "/env/lake")
    monkeypatch.setenv("MEDALLION_LANDING", "/env/landing")
    args = build_parser().parse_args(["run"])
    assert (args.lake, args.landing) == ("/env/lake", "/env/landing")
    assert build_parser().parse_args(["status", "--lake", "/given"]).lake == "/given"
    monkeypatch.delenv("MEDALLION_LAKE")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["status"])


def test_doctor_checks_what_a_run_needs_and_says_how_to_fix_it(tmp_path, monkeypatch, capsys):
    from medallion.cli import main

    assert main(["doctor", "--lake", str(tmp_path / "lake")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[1] for line in lines if not line.startswith(" ")] == [
        "java",
        "jars",
        "lake",
        "bundle",
        "databricks",
    ]
    assert lines[0].split()[:3] == ["ok", "java", "Java"]
    # A JAVA_HOME without Java and a lake under a file: both fail, each with its fix.
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    (tmp_path / "file").write_text("x")
    assert main(["doctor", "--lake", str(tmp_path / "file" / "lake")]) == 1
    out = capsys.readouterr().out
    assert re.search(r"FAIL +java +not found \(JAVA_HOME=", out) and "fix: install a JDK 17" in out
    assert re.search("FAIL +lake", out) and "fix: give another --lake" in out


def test_doctor_reads_the_databricks_profiles_as_the_cli_does(tmp_path, monkeypatch):
    from medallion.ops.doctor import databricks_check

    config = tmp_path / "databrickscfg"
    config.write_text("[DEFAULT]\nhost = https://a\n\n[dev]\nhost = https://b\ntoken = x\n")
    monkeypatch.delenv("DATABRICKS_HOST", raising=False)
    monkeypatch.setenv("DATABRICKS_CONFIG_FILE", str(config))
    check = databricks_check()
    assert check.ok and check.detail.endswith("profiles DEFAULT, dev")
    config.write_text("host = https://a\n[dev\n")  # not an INI file
    assert databricks_check().ok is False
