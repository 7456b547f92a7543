"""Shared fixtures: one local Spark session per test run, and fresh lake/landing folders."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import time
from collections.abc import Iterator
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
# Every JVM of the suite (the shared session, and those of the processes it starts) compiles
# with C1 alone: most are short-lived, where C2's compilations cost more CPU than they save,
# and the long-lived ones were no slower. C1's default code cache (48 MB) fills within a
# minute of Spark, after which the JVM interprets: hence the larger one (docs/testing.md).
os.environ.setdefault(
    "MEDALLION_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m"
)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Before any JVM of the run starts (and before pytest-xdist starts its workers): the
    class-data archive that every local JVM of the suite maps (medallion/class_archive.py),
    made by one training run when this machine has none yet."""
    if hasattr(session.config, "workerinput"):
        return
    from medallion.class_archive import build

    build()


@contextlib.contextmanager
def _one_session_start_at_a_time() -> Iterator[None]:
    """Start sessions one at a time on this machine: the first of the suite's workers to start
    resolves the jars a new set of packages needs (Ivy's cache is not safe for two at once),
    the others then find them in medallion's jar cache."""
    from medallion.jars import cache_root

    cache_root().mkdir(parents=True, exist_ok=True)
    with open(cache_root() / ".session-start.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def spark():
    """The one SparkSession of the test run, or of each pytest-xdist worker (local delta-spark,
    UTC, UI off)."""
    from medallion.session import get_spark

    with _one_session_start_at_a_time():
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


# Tests that share a session-scoped fixture too costly to make twice run in one pytest-xdist
# worker: the fixture's name -> the group (``make test`` runs ``--dist loadgroup``).
SHARED_FIXTURE_GROUPS = {
    "kafka_broker": "kafka",
    "local_jobs": "local-jobs",
    "reference_lake": "reference-lake",
}
# The longest work first, so that the workers finish together: these run in this order before
# the rest (durations of docs/testing.md); a group or module, by the name shown.
LONGEST_FIRST = (
    "local-jobs",
    "tests/integration/test_reliability.py",
    "kafka",
    "tests/test_bench_smoke.py",
    "tests/integration/test_spark_cluster.py",
    "tests/integration/test_console.py",
    "tests/integration/test_fusion.py",
    "tests/integration/test_operator_faults.py",
    "tests/integration/test_banking.py",
    "tests/integration/test_customers.py",
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group the tests of each costly shared fixture, and order the longest work first."""

    def unit(item: pytest.Item) -> str:
        groups = [g for f, g in SHARED_FIXTURE_GROUPS.items() if f in item.fixturenames]
        return groups[0] if groups else item.nodeid.split("::")[0]

    for item in items:
        group = unit(item)
        if group in SHARED_FIXTURE_GROUPS.values():
            item.add_marker(pytest.mark.xdist_group(group))

    def rank(item: pytest.Item) -> int:
        name = unit(item)
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: collection order within each


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
