"""Shared fixtures: one local Spark session per test run, and fresh lake/landing folders."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

# Timestamps collected to Python are naive local times: make local time UTC.
os.environ["TZ"] = "UTC"
time.tzset()

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


# --- Kafka: a real broker, started only when a Kafka test runs (tests/kafka_broker.py) ---


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the shared Spark session with the Kafka connector when ``kafka`` tests are selected.

    A running JVM cannot load more packages, so this is decided before any session exists;
    runs without Kafka tests never resolve the connector.
    """
    if any(item.get_closest_marker("kafka") for item in session.items):
        from medallion.session import kafka_packages

        extra = [p for p in os.environ.get("MEDALLION_EXTRA_PACKAGES", "").split(",") if p]
        packages = dict.fromkeys([*extra, *kafka_packages()])
        os.environ["MEDALLION_EXTRA_PACKAGES"] = ",".join(packages)


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory):
    """A single-node Kafka broker (KRaft) on free 127.0.0.1 ports, stopped after the run."""
    from kafka_broker import KafkaBroker

    broker = KafkaBroker(tmp_path_factory.mktemp("kafka-broker"))
    broker.start()
    yield broker
    broker.stop()
