"""Every `medallion` command in a fenced shell block of the README and docs/ is a command the CLI
takes, and those that need no workspace, broker, cluster or terminal run against a small lake."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from lake_copy import copy_lake

from medallion.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_LANGUAGES = ("bash", "sh", "shell", "console", "")
COMMAND = re.compile(r"(?:\.venv/bin/)?medallion(?= |$)")
OUTPUT = re.compile(r"medallion( [a-z]+)?:")  # what a command prints, such as its refusal

# Commands that need what a laptop test has not got, and the tests that cover them instead.
ELSEWHERE = {
    "/Volumes/": "a Unity Catalog volume: tests/bundle/test_workspace.py",
    "/shared/": "a Spark cluster: tests/integration/test_spark_cluster.py",
    "--target dev": "a workspace: tests/bundle/test_workspace.py",
    "--source kafka": "a broker: tests/integration/test_kafka.py",
    "job run": "the bundle's notebooks: tests/bundle/test_local_jobs.py",
    " shell ": "a terminal: tests/integration/test_console.py",
    " dashboard ": "a browser: tests/integration/test_dashboard.py",
    "shipments": "the tutorial's own pipeline: tests/integration/test_tutorial_pipeline.py",
}


def documented_commands() -> list[tuple[str, list[str], int]]:
    """(where, argv, expected exit code) of each command in the docs' shell blocks; a command
    whose next line is its refusal (``medallion X: error``) is expected to exit 2."""
    found = []
    for doc in DOCS:
        for block in shell_blocks(doc.read_text()):
            lines = block.replace("\\\n", " ").splitlines()
            for index, line in enumerate(lines):
                text = line.strip().removeprefix("$ ")
                if not COMMAND.match(text) or OUTPUT.match(text):
                    continue
                argv = shlex.split(text, comments=True)[1:]
                following = lines[index + 1] if index + 1 < len(lines) else ""
                refused = re.match(
                    rf"medallion {re.escape(argv[0] if argv else '')}: error", following
                )
                found.append((doc.name, [a for a in argv if a != "..."], 2 if refused else 0))
    return found


def shell_blocks(markdown: str) -> list[str]:
    """The fenced blocks of ``markdown`` in a shell language (or none), fences paired in order."""
    blocks, language, lines = [], None, []
    for line in markdown.splitlines():
        if line.startswith("```"):
            if language is None:
                language, lines = line[3:].strip(), []
            else:
                if language in SHELL_LANGUAGES:
                    blocks.append("\n".join(lines) + "\n")
                language = None
        elif language is not None:
            lines.append(line)
    return blocks


COMMANDS = documented_commands()


def test_the_docs_show_commands_of_every_kind():
    kinds = {argv[0] for _, argv, _ in COMMANDS if argv}
    assert {"generate", "run", "show", "status", "maintain", "job", "shell"} <= kinds


@pytest.mark.parametrize(("doc", "argv", "code"), COMMANDS)
def test_a_documented_command_is_one_the_cli_takes(doc, argv, code):
    build_parser().parse_args(argv)  # exits 2 on an unknown flag or a missing argument


@pytest.mark.slow
def test_the_documented_commands_run_against_a_small_lake(reference_lake, tmp_path, capsys):
    landing, lake = copy_lake(reference_lake, tmp_path)
    places = {
        "build/demo/landing": landing,
        "build/demo/lake": lake,
        "build/bank/landing": landing,
        "build/bank/lake": lake,
    }
    ran = 0
    for doc, argv, code in COMMANDS:
        text = f" {' '.join(argv)} "
        if any(marker in text for marker in ELSEWHERE):
            continue
        if argv[0] == "generate":  # aside, so the lake's streams stay up to date
            at = argv.index("--landing") + 1
            argv = [*argv[:at], str(tmp_path / "generated"), *argv[at + 1 :]]
        argv = [str(places.get(a, a)) for a in argv]
        if argv[0] == "run":  # one pipeline: its streams have nothing new
            pairs = zip(argv, ["", *argv[:-1]], strict=True)
            argv = [a for a, before in pairs if "--pipeline" not in (a, before)]
            argv += ["--pipeline", "iot"]
        capsys.readouterr()
        assert main(argv) == code, f"{doc}: medallion {' '.join(argv)}"
        ran += 1
    assert ran >= 5
