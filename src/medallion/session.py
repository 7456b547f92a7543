"""get_spark(): the running Databricks session, Databricks Connect, Spark Connect, or local Delta."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from medallion.config import Config

log = logging.getLogger(__name__)

# delta-spark 4.4.1 (PyPI) pairs with Spark 4.2; Maven Central publishes the Spark 4.2 build of
# the Delta jars as 4.4.0, the newest patch release of that line, so the jar version is pinned.
DELTA_MAVEN_PACKAGE = "io.delta:delta-spark_4.2_2.13:4.4.0"

# Spark's Kafka connector (spark-sql-kafka-0-10_2.13 4.2.0) as one coordinate: a POM shipped in
# medallion/maven that Ivy reads from that folder while every jar comes from Maven Central. The
# POM says why the connector's own POM cannot be used alone. Only the Kafka source needs it, so
# file runs never resolve it. MEDALLION_KAFKA_PACKAGES replaces it (comma-separated).
KAFKA_MAVEN_PACKAGE = "medallion.local:spark-kafka-connector_2.13:4.2.0"
_BUNDLED_GROUP = "medallion.local"
BUNDLED_MAVEN_REPOSITORY = Path(__file__).resolve().parent / "maven"

LOCAL_SPARK_CONF: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
    "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
    # A laptop has a couple of cores: few partitions everywhere, no UI, no progress bars.
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.streaming.metricsEnabled": "true",
    # The run summary adds up every batch's progress; keep enough of them.
    "spark.sql.streaming.numRecentProgressUpdates": "10000",
    "spark.databricks.delta.properties.defaults.enableChangeDataFeed": "false",
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
    # medallion compacts small files itself, once they pile up (medallion/compaction.py): no
    # synchronous auto compaction inside commits, no shuffle added before every write, and
    # OPTIMIZE leaves files of 32 MiB and more as they are.
    "spark.databricks.delta.autoCompact.enabled": "false",
    "spark.databricks.delta.optimizeWrite.enabled": "false",
    "spark.databricks.delta.optimize.minFileSize": str(32 * 1024 * 1024),
}

# medallion's own local sessions evaluate queries rather than compile them to Java: a stream's
# batches and Delta's reads of its own log (for every write tagged with txnAppId) are small,
# and generating their code each time took a third of a streaming run's CPU. Large batches of
# events are compiled all the same (pipelines/retail/events.py).
INTERPRETED_QUERIES: dict[str, str] = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


def _running_on_databricks() -> bool:
    return "DATABRICKS_RUNTIME_VERSION" in os.environ


def _databricks_connect_configured() -> bool:
    try:
        import databricks.connect  # noqa: F401
    except ImportError:
        return False
    keys = ("DATABRICKS_HOST", "DATABRICKS_CONFIG_PROFILE", "DATABRICKS_CLUSTER_ID")
    keys += ("DATABRICKS_SERVERLESS_COMPUTE_ID",)
    return any(os.environ.get(k) for k in keys) or os.path.exists(
        os.path.expanduser("~/.databrickscfg")
    )


def session_kind() -> str:
    """Which session :func:`get_spark` would build: databricks, databricks-connect, spark-connect, local."""
    if _running_on_databricks():
        return "databricks"
    if _databricks_connect_configured():
        return "databricks-connect"
    if os.environ.get("SPARK_REMOTE", "").startswith("sc://"):
        return "spark-connect"
    return "local"


def _split_packages(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def kafka_packages() -> list[str]:
    """The Maven coordinates of Spark's Kafka connector (``MEDALLION_KAFKA_PACKAGES`` overrides)."""
    return _split_packages(os.environ.get("MEDALLION_KAFKA_PACKAGES", "")) or [KAFKA_MAVEN_PACKAGE]


def packages_for(config: Config) -> list[str]:
    """The Maven packages, beyond Delta, that a local session needs for ``config``'s sources."""
    return kafka_packages() if config.source == "kafka" else []


def local_packages(packages: Sequence[str] = ()) -> list[str]:
    """Delta, then ``packages``, then ``MEDALLION_EXTRA_PACKAGES``, each once."""
    extra = _split_packages(os.environ.get("MEDALLION_EXTRA_PACKAGES", ""))
    return list(dict.fromkeys([DELTA_MAVEN_PACKAGE, *packages, *extra]))


# The local driver's heap. 1 GiB took a backfill of 2M events in one batch (batches are cached
# with memory-and-disk storage); 2 GiB took about the same time for 1M events and 1 GB more
# resident memory, which the JVM gives back to the system only when it exits.
DEFAULT_DRIVER_MEMORY = "1g"


def driver_memory() -> str:
    """The local driver's heap: ``MEDALLION_DRIVER_MEMORY``, else :data:`DEFAULT_DRIVER_MEMORY`."""
    return os.environ.get("MEDALLION_DRIVER_MEMORY", DEFAULT_DRIVER_MEMORY)


def local_builder(
    app_name: str = "medallion",
    master: str | None = None,
    extra: dict | None = None,
    packages: Sequence[str] = (),
):
    """A SparkSession builder for local delta-spark with small-machine settings.

    ``packages`` are more Maven coordinates to resolve with Delta (see :func:`packages_for`).
    """
    from pyspark.sql import SparkSession

    resolved = local_packages(packages)
    master = master or os.environ.get("MEDALLION_SPARK_MASTER", "local[*]")
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master)
        .config("spark.jars.packages", ",".join(resolved))
        .config("spark.driver.memory", driver_memory())
    )
    if master.startswith("local"):
        # Everything runs in this one JVM: keep the driver's ports on the loopback interface.
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1")
        builder = builder.config("spark.driver.host", "127.0.0.1")
    if any(p.startswith(f"{_BUNDLED_GROUP}:") for p in resolved):
        # Consulted after Maven Central, for medallion's own POMs only.
        builder = builder.config("spark.jars.repositories", BUNDLED_MAVEN_REPOSITORY.as_uri())
    for key, value in {**LOCAL_SPARK_CONF, **(extra or {})}.items():
        builder = builder.config(key, value)
    return builder


def get_spark(
    app_name: str = "medallion",
    master: str | None = None,
    extra: dict | None = None,
    packages: Sequence[str] = (),
) -> SparkSession:
    """Return a SparkSession, choosing in order:

    1. the running session on a Databricks cluster;
    2. ``DatabricksSession`` when databricks-connect is installed and configured;
    3. Spark Connect when ``SPARK_REMOTE=sc://...`` is set;
    4. otherwise local delta-spark (``local[*]``, UTC, few partitions, UI off).

    ``packages`` (see :func:`packages_for`) only matter for a new local session: Databricks
    runtimes ship the Kafka connector, and a running JVM cannot load more packages.
    """
    from pyspark.sql import SparkSession

    kind = session_kind()
    if kind == "databricks":
        return SparkSession.builder.getOrCreate()
    if kind == "databricks-connect":
        from databricks.connect import DatabricksSession

        return DatabricksSession.builder.getOrCreate()
    if kind == "spark-connect":
        spark = SparkSession.builder.remote(os.environ["SPARK_REMOTE"]).getOrCreate()
        spark.conf.set("spark.sql.session.timeZone", "UTC")
        return spark
    active = SparkSession.getActiveSession()
    if active is not None:
        loaded = active.sparkContext.getConf().get("spark.jars.packages", "")
        missing = [p for p in packages if p not in loaded]
        if missing:
            log.warning("the running Spark session was started without %s", ", ".join(missing))
        return active
    with _driver_owns_sigterm():
        confs = {**INTERPRETED_QUERIES, **(extra or {})}
        spark = local_builder(app_name, master, confs, packages).getOrCreate()
    quiet_spark_logs(spark)
    return spark


@contextlib.contextmanager
def _driver_owns_sigterm() -> Iterator[None]:
    """Start the local JVM with SIGTERM ignored, so that only this driver acts on it.

    A SIGTERM to the whole process group (``kill -TERM -PGID``, systemd's default
    ``KillMode=control-group``) would otherwise kill the JVM at once, under the driver's
    graceful stop. The JVM keeps a signal that it inherits as ignored ignored (PySpark does
    the same for SIGINT), and dies with the driver all the same: it exits when its stdin, a
    pipe from this process, closes. SIGTERM is blocked meanwhile, so one that arrives while
    the JVM starts is delivered to the driver's own handler afterwards, not lost.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may change signal handlers
        return
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def quiet_spark_logs(spark: SparkSession, level: str | None = None) -> None:
    """Turn Spark's own logging down to warnings (or ``MEDALLION_SPARK_LOG_LEVEL``)."""
    level = level or os.environ.get("MEDALLION_SPARK_LOG_LEVEL", "WARN")
    try:
        spark.sparkContext.setLogLevel(level)
    except Exception:  # Spark Connect has no SparkContext; the server decides its logging.
        log.debug("could not set the Spark log level", exc_info=True)


def is_connect_session(spark: SparkSession) -> bool:
    """True for a Spark Connect session (a remote client, Databricks serverless included)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")
