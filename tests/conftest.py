"""Shared fixtures: one local Spark session per test run, and fresh lake/landing folders."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from processes import LONG_LIVED_JVM_OPTIONS, short_lived_jvms_by_default

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

# Timestamps collected to Python are naive local times: make local time UTC.
os.environ["TZ"] = "UTC"
time.tzset()

# Lean local Spark for a 2-core machine; set before any session exists.
os.environ.setdefault("MEDALLION_SPARK_MASTER", "local[2]")
os.environ.setdefault("MEDALLION_DRIVER_MEMORY", "3g")
# Python workers of the shared JVM (the Spark Connect server's foreachBatch runners among
# them, tests/bundle/test_connect.py) run this interpreter, with medallion importable.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
short_lived_jvms_by_default()
# The erasure key of the test run (medallion/erasure_key.py): made here, kept nowhere. Tests of
# a missing or another key change it for themselves.
os.environ.setdefault("MEDALLION_ERASURE_KEY", f"test-run-{os.urandom(24).hex()}")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Before any JVM of the run starts: the class-data archive that every local JVM of the
    suite maps (medallion/class_archive.py), made by one training run when this machine has
    none yet."""
    from medallion.class_archive_training import build

    build()


@pytest.fixture(scope="session")
def spark():
    """The one SparkSession of the test run (local delta-spark, UTC, UI off)."""
    from medallion.session import get_spark

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MEDALLION_JAVA_OPTIONS", LONG_LIVED_JVM_OPTIONS)
        session = get_spark(app_name="medallion-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def reference_lake(spark, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lake of every pipeline, built once per run: two deliveries (the second with customer
    updates and deletes). Its folder holds ``landing/`` and ``lake/``. Tests only read it; one
    that writes works on a copy (``lake_copy.copy_lake``), whose streams go on from here."""
    from medallion.config import Config
    from medallion.pipelines import generate_input
    from medallion.streams.runner import run_available_now

    root = tmp_path_factory.mktemp("reference")
    config = Config(landing=str(root / "landing"), lake=str(root / "lake"))
    generate_input(config.landing, records=600, customers=80, files=2, seed=41)
    run_available_now(spark, config)
    generate_input(config.landing, ["retail"], records=300, customers=80, files=2, seed=42)
    run_available_now(spark, config)
    return root


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
