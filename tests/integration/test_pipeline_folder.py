"""A pipeline is one folder. IoT's package, copied under a new name into a copy of the
repository with its own names changed inside it and no other file touched, is a pipeline of
its own: the registry lists it, `medallion run` takes it end to end (silver and gold equal to
the plain-Python oracle), the bundle gives it its jobs and dashboard, and the tests that derive
their lists from the registry pass with it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from deltalake import DeltaTable
from iot_oracle import expected_from

pytestmark = pytest.mark.slow  # left out of make test-fast (docs/testing.md)

REPO = Path(__file__).resolve().parents[2]
# Inside the copy only: what must be new for the registry and the bundle (the pipeline's name,
# its tables, flows, datasets, views, jobs and dashboard), left to the copy's own text.
RENAMES = (
    (r"device_readings", "sensor_readings"),
    (r"device_status", "sensor_status"),
    (r"device_minute_metrics", "sensor_minute_metrics"),
    (r"device_minutes", "sensor_minutes"),
    (r"(?<![A-Za-z])iot(?![A-Za-z])", "sensors"),
    (r"IoT", "Sensors"),
    (r"IOT", "SENSORS"),
)


def _copy_repository(target: Path) -> None:
    """The files git tracks, as a clean clone holds them."""
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def _copy_pipeline(tree: Path) -> Path:
    """``pipelines/iot`` copied to ``pipelines/sensors``, renamed inside: nothing else edited."""
    folder = tree / "src" / "medallion" / "pipelines" / "sensors"
    shutil.copytree(tree / "src" / "medallion" / "pipelines" / "iot", folder)
    for path in folder.rglob("*"):
        if path.is_file():
            text = path.read_text()
            for pattern, new in RENAMES:
                text = re.sub(pattern, new, text)
            path.write_text(text)
    return folder


def _in(tree: Path, *command: str, timeout: float = 900) -> str:
    """``command`` run with the copy's package first on the path; its output."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tree / "src"), os.environ.get("PYTHONPATH", "")]),
        "MEDALLION_BUNDLE_ROOT": str(tree),
    }
    env.pop("MEDALLION_PIPELINES", None)
    done = subprocess.run(
        command, cwd=tree, capture_output=True, text=True, timeout=timeout, env=env
    )
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    return done.stdout


def _medallion(tree: Path, *args: str) -> str:
    return _in(tree, sys.executable, "-m", "medallion.cli", *args)


def _rows(path: Path) -> list[dict]:
    """A Delta table's rows, read by delta-rs; timestamps naive UTC, as Spark's."""
    rows = DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    for row in rows:
        for key, value in row.items():
            if isinstance(value, datetime) and value.tzinfo is not None:
                row[key] = value.astimezone(timezone.utc).replace(tzinfo=None)
    return rows


def test_a_copied_pipeline_folder_is_a_pipeline_with_no_other_file_edited(tmp_path):
    tree = tmp_path / "repo"
    _copy_repository(tree)
    _copy_pipeline(tree)
    where = _in(tree, sys.executable, "-c", "import medallion; print(medallion.__file__)")
    assert where.strip() == str(tree / "src" / "medallion" / "__init__.py")

    listed = _medallion(tree, "pipelines")
    assert "sensors" in listed and "iot" in listed
    jobs = _medallion(tree, "job", "list")
    assert "medallion_sensors " in jobs and "medallion_sensors_stream " in jobs

    # The tests whose lists come from the registry and the package folders pass in the copy:
    # the declarations, the documented lineage, the bundle's files, jobs and dashboards.
    _in(
        tree,
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/unit/test_declarations.py",
        "tests/bundle/test_bundle_config.py",
    )

    landing, lake = tmp_path / "landing", tmp_path / "lake"
    _medallion(
        tree,
        "generate",
        "--landing",
        str(landing),
        "--pipeline",
        "sensors",
        "--records",
        "300",
        "--files",
        "2",
        "--seed",
        "3",
    )
    assert sorted(p.name for p in landing.iterdir()) == ["sensor_readings"]
    _medallion(tree, "run", "--landing", str(landing), "--lake", str(lake), "--pipeline", "sensors")
    assert sorted(p.name for p in (lake / "gold").iterdir()) == [
        "sensor_minute_metrics",
        "sensor_status",
    ]

    expected = expected_from(landing, dataset="sensor_readings")
    silver = {
        (r["device_id"], r["reading_timestamp"]): (r["temperature"], r["humidity"], r["status"])
        for r in _rows(lake / "silver" / "sensor_readings")
    }
    assert silver == {
        (k[0], k[1].replace(tzinfo=None)): (v["temperature"], v["humidity"], v["status"])
        for k, v in expected.silver.items()
    }
    quarantine = _rows(lake / "silver" / "sensor_readings_quarantine")
    assert len(quarantine) == expected.quarantined and all(r["reason"] for r in quarantine)
    status = {
        r["device_id"]: (r["reading_timestamp"], r["temperature"])
        for r in _rows(lake / "gold" / "sensor_status")
    }
    assert status == {
        d: (r["reading_timestamp"].replace(tzinfo=None), r["temperature"])
        for d, r in expected.status().items()
    }
    minutes = {
        (r["device_id"], r["minute_start"]): r
        for r in _rows(lake / "gold" / "sensor_minute_metrics")
    }
    want = {(k[0], k[1].replace(tzinfo=None)): v for k, v in expected.minutes().items()}
    assert set(minutes) == set(want)
    for key, row in want.items():
        assert {c: minutes[key][c] for c in row} == row, key
