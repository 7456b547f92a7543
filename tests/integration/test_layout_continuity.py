"""A retail lake written by the code from before pipelines were declared (the last commit of
that layout, read from this repository's history) is continued by today's code: same table
paths, catalog names and checkpoint folders; every stream resumes after its last batch, and
nothing is read twice."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from lake_checks import assert_customers_match, assert_lake_matches
from oracle import expected_customers, expected_from

from medallion.config import Config
from medallion.pipelines import pipelines
from medallion.pipelines.retail.generator import generate
from medallion.streams.runner import run_available_now
from medallion.tables import read_table

ROOT = Path(__file__).resolve().parents[2]
# The last commit whose retail tables and flows were not declared (pipelines/retail came next).
BEFORE_DECLARATIONS = "07c36dcb715ac980a23573457f3701bdb728dc0a"
RETAIL_STREAMS = ("bronze_events", "bronze_customers", "silver_customers", "gold_customer_changes")


def _old_source(target: Path) -> Path:
    """The ``src`` folder of :data:`BEFORE_DECLARATIONS`, from the repository's history."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", BEFORE_DECLARATIONS, "src"],
        capture_output=True,
    )
    if archive.returncode:
        pytest.fail(
            f"this test reads commit {BEFORE_DECLARATIONS[:7]} from the repository's history "
            f"(a full clone): {archive.stderr.decode(errors='replace').strip()}"
        )
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(target, filter="data")
    return target / "src"


def _committed(checkpoint: Path) -> list[int]:
    return sorted(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())


def _folders(root: Path, parents: tuple[str, ...]) -> set[str]:
    return {f"{parent}/{p.name}" for parent in parents for p in (root / parent).glob("*")}


@pytest.mark.slow
def test_a_lake_of_the_old_layout_continues_without_reprocessing(spark, tmp_path):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    old_src = _old_source(tmp_path / "old")
    generate(str(landing), events=400, customers=40, files=2, seed=31)
    old_run = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, medallion; print(medallion.__file__); "
            "from medallion.cli import main; sys.exit(main(sys.argv[1:]))",
            "run",
            "--landing",
            str(landing),
            "--lake",
            str(lake),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": str(old_src)},
    )
    assert old_run.returncode == 0, old_run.stderr[-3000:]
    assert old_run.stdout.startswith(str(old_src)), "the old code ran"
    assert not (old_src / "medallion" / "pipelines").exists()
    tables_before = _folders(lake, ("bronze", "silver", "gold"))
    checkpoints_before = _folders(lake, ("_checkpoints",))
    checkpoints = lake / "_checkpoints"
    batches_before = {name: _committed(checkpoints / name) for name in RETAIL_STREAMS}
    first_offsets = {
        name: (checkpoints / name / "offsets" / "0").read_bytes() for name in RETAIL_STREAMS
    }
    assert all(batches_before.values())

    generate(str(landing), events=200, customers=20, files=1, seed=32)
    config = Config(landing=str(landing), lake=str(lake))
    report = run_available_now(spark, config)
    (retail,) = pipelines(["retail"])
    assert {t.table for t in report.tables} <= {t.key for t in retail.tables}
    # Only retail had input or tables: no other pipeline's table appeared, and retail's kept
    # their folders and checkpoints.
    assert _folders(lake, ("bronze", "silver", "gold")) == tables_before
    assert checkpoints_before <= _folders(lake, ("_checkpoints",))
    for name, before in batches_before.items():
        after = _committed(checkpoints / name)
        assert after[: len(before)] == before, name
        assert len(after) > len(before), f"{name} did not resume"
        assert (checkpoints / name / "offsets" / "0").read_bytes() == first_offsets[name], name
    # Every line once: a stream that started again from batch 0 would have doubled bronze.
    assert_lake_matches(spark, config, expected_from(landing))
    assert_customers_match(spark, config, expected_customers(landing))
    assert (
        spark.table("medallion.silver_events").count()
        == read_table(spark, config.table("silver/events")).count()
    )
