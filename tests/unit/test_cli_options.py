"""``medallion run``'s Delta source flags map onto DeltaSourceOptions (no Spark needed)."""

from __future__ import annotations

import logging

import pytest

from medallion.cli import build_parser, delta_source_options_from_args
from medallion.config import DeltaSourceOptions

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
