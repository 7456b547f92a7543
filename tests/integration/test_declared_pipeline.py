"""A pipeline declared only inside tests/ (tests/pipelines/meters.py) runs through the same
commands as retail, without a line of the engine knowing it: run, status, maintain, reset.

A new process finds the pipeline through ``$MEDALLION_PIPELINES`` (``medallion pipelines``,
which starts no JVM); the commands that run Spark call the same CLI in this process, on its
session, with the pipeline registered for the test only."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from medallion.cli import main
from medallion.pipelines import registered

pytestmark = pytest.mark.slow  # left out of make test-fast (docs/testing.md)

PIPELINES = Path(__file__).resolve().parents[1] / "pipelines"


@pytest.fixture
def meters():
    sys.path.insert(0, str(PIPELINES))
    try:
        with registered(importlib.import_module("meters").METERS) as pipeline:
            yield pipeline
    finally:
        sys.path.remove(str(PIPELINES))


def _in_process(capsys, *args: str) -> str:
    capsys.readouterr()
    assert main(list(args)) == 0
    return capsys.readouterr().out


def _medallion(*args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(PIPELINES), os.environ.get("PYTHONPATH", "")]),
        "MEDALLION_PIPELINES": "meters",
    }
    command = [sys.executable, "-m", "medallion.cli", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _land(landing: Path, name: str, lines: list[str]) -> None:
    folder = landing / "meter_readings"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(f"{line}\n" for line in lines))


def _reading(meter: str, reading: object, at: str) -> str:
    return json.dumps({"meter_id": meter, "reading": reading, "read_at": at})


def _latest(spark, lake: Path) -> dict[str, tuple[int, str]]:
    rows = spark.read.format("delta").load(str(lake / "gold" / "meter_latest")).collect()
    return {r.meter_id: (r.reading, r.read_at.strftime("%Y-%m-%dT%H:%M")) for r in rows}


def test_a_pipeline_declared_in_tests_runs_through_run_status_maintain_and_reset(
    spark, dirs, meters, capsys
):
    landing, lake = dirs
    _land(
        landing,
        "a.json",
        [
            _reading("m1", 10, "2026-11-25T10:00:00Z"),
            _reading("m1", 12, "2026-11-25T11:00:00Z"),
            _reading("m2", 5, "2026-11-25T09:00:00Z"),
            _reading("m3", "lots", "2026-11-25T09:00:00Z"),  # not an integer: never in gold
            "{not json",
        ],
    )
    listed = _medallion("pipelines").stdout
    assert "meters\n" in listed and "flow gold_meter_latest (gold): bronze/meter_readings" in listed

    run = _in_process(capsys, "run", "--landing", str(landing), "--lake", str(lake))
    assert "gold/meter_latest" in run
    # Retail had no input here: none of its tables was made.
    assert sorted(p.name for p in (lake / "bronze").iterdir()) == ["meter_readings"]
    assert _latest(spark, lake) == {"m1": (12, "2026-11-25T11:00"), "m2": (5, "2026-11-25T09:00")}

    # A late, older reading never replaces a newer one; a newer one does.
    _land(
        landing,
        "b.json",
        [_reading("m1", 7, "2026-11-25T08:00:00Z"), _reading("m2", 6, "2026-11-25T12:00:00Z")],
    )
    _in_process(
        capsys, "run", "--landing", str(landing), "--lake", str(lake), "--pipeline", "meters"
    )
    expected = {"m1": (12, "2026-11-25T11:00"), "m2": (6, "2026-11-25T12:00")}
    assert _latest(spark, lake) == expected

    status = json.loads(
        _in_process(capsys, "status", "--lake", str(lake), "--pipeline", "meters", "--json")
    )
    assert {s["stream"] for s in status["streams"]} == {
        "bronze_meter_readings",
        "gold_meter_latest",
    }
    assert all(s["last_batch"] is not None for s in status["streams"])
    assert {t["table"] for t in status["tables"]} >= {"bronze/meter_readings", "gold/meter_latest"}

    # The declared layout and maintenance policy: gold clustered, bronze never vacuumed.
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{lake / 'gold' / 'meter_latest'}`").first()
    assert list(detail["clusteringColumns"]) == ["meter_id"]
    maintained = _in_process(capsys, "maintain", "--lake", str(lake), "--pipeline", "meters")
    rows = {line.split()[0]: line for line in maintained.splitlines()[2:]}
    assert "silver/events" not in rows
    assert "clustered by meter_id" in rows["gold/meter_latest"]
    assert "no VACUUM (its declaration)" in rows["bronze/meter_readings"]

    _in_process(
        capsys, "reset", "--lake", str(lake), "--layer", "gold", "--pipeline", "meters", "--yes"
    )
    assert not (lake / "gold" / "meter_latest").exists()
    assert not (lake / "_checkpoints" / "gold_meter_latest").exists()
    _in_process(capsys, "run", "--landing", str(landing), "--lake", str(lake))
    assert _latest(spark, lake) == expected
