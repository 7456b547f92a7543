"""Shared fixtures: one local Spark session per test run, and fresh lake/landing folders."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

# Lean local Spark for a 2-core machine; set before any session exists.
os.environ.setdefault("MEDALLION_SPARK_MASTER", "local[2]")
os.environ.setdefault("MEDALLION_DRIVER_MEMORY", "3g")


@pytest.fixture(scope="session")
def spark():
    """The one SparkSession of the test run (local delta-spark, UTC, UI off)."""
    from medallion.session import get_spark

    session = get_spark(app_name="medallion-tests")
    yield session
    session.stop()


@pytest.fixture
def dirs(tmp_path: Path):
    """A fresh (landing, lake) pair of folders."""
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    landing.mkdir()
    lake.mkdir()
    return landing, lake


@pytest.fixture
def config(dirs):
    """A local Config over fresh folders."""
    from medallion.config import Config

    landing, lake = dirs
    return Config(landing=str(landing), lake=str(lake))
