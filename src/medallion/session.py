"""get_spark(): the running Databricks session, Databricks Connect, Spark Connect, or local Delta."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from medallion import class_archive, console
from medallion.jars import cache_root, cached_jars, store_jars
from medallion.jvm_options import LOCAL_JVM_OPTIONS, driver_memory, java_options, with_java_options
from medallion.local_fs import local_file_system_conf

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

# The Maven packages a local session was started with (from the jar cache or resolved).
PACKAGES_CONF = "spark.medallion.packages"

# The JVM's logging: warnings to stderr, the noise of a laptop run raised to errors only.
LOG4J2_CONFIGURATION = Path(__file__).resolve().parent / "conf" / "log4j2.properties"

LOCAL_SPARK_CONF: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.extraJavaOptions": " ".join(
        [
            "-Duser.timezone=UTC",
            f"-Dlog4j2.configurationFile={LOG4J2_CONFIGURATION.as_uri()}",
            *LOCAL_JVM_OPTIONS,
        ]
    ),
    "spark.executor.extraJavaOptions": " ".join(["-Duser.timezone=UTC", *LOCAL_JVM_OPTIONS]),
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
    # Renames on the local disk through Hadoop's FileSystem, not its FileContext: without
    # Hadoop's native library, FileContext forks a `readlink` process for each side of every
    # rename (about 500 a retail run, 3 s of it). The checkpoint's files and Delta's commits
    # are renamed into place as before: written to a temporary file first, and a commit never
    # replaces one that exists (LocalLogStore checks and renames under one lock in the JVM).
    # docs/development.md has the measurements.
    "spark.sql.streaming.checkpointFileManagerClass": (
        "org.apache.spark.sql.execution.streaming.checkpointing."
        "FileSystemBasedCheckpointFileManager"
    ),
    "spark.delta.logStore.file.impl": "io.delta.storage.LocalLogStore",
    # A cached batch larger than the storage memory spills blocks to disk, written with Java
    # serialization. Reading one back, the ObjectInputStream keeps every object it has read
    # until the writer's next reset (every 100 objects by default): a partition's whole array
    # of cached column batches, about 110 MiB of a 384 MiB batch, held outside Spark's memory
    # accounting by each task. Two such tasks ran a 1 GiB driver out of heap (a heap dump of
    # a large backfill, docs/benchmarks.md). A reset after each object bounds it by one.
    "spark.serializer.objectStreamReset": "1",
}

# medallion's own local sessions evaluate queries rather than compile them to Java: a stream's
# batches and Delta's reads of its own log (a MERGE's snapshot, its file list) are small,
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
        # deferred: only in databricks-connect's own environment
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


def _repositories(packages: Sequence[str]) -> list[str]:
    """Maven repositories beyond Central: medallion's own POMs, when a package is one."""
    bundled = any(p.startswith(f"{_BUNDLED_GROUP}:") for p in packages)
    return [BUNDLED_MAVEN_REPOSITORY.as_uri()] if bundled else []


def local_conf(
    app_name: str = "medallion",
    master: str | None = None,
    extra: dict | None = None,
    packages: Sequence[str] = (),
    java: str = "",
) -> dict[str, str]:
    """The settings of a local delta-spark session for a small machine.

    ``packages`` are more Maven coordinates to load with Delta (see :func:`packages_for`):
    from the jar cache when it holds them (``spark.jars``, medallion/jars.py), else resolved
    from Maven Central (``spark.jars.packages``). ``java``: more options for its JVMs (a
    small run's, medallion/streams/run_size.py), before the user's ``MEDALLION_JAVA_OPTIONS``.
    """
    resolved = local_packages(packages)
    repositories = _repositories(resolved)
    master = master or os.environ.get("MEDALLION_SPARK_MASTER", "local[*]")
    conf = {"spark.app.name": app_name, "spark.master": master}
    conf["spark.driver.memory"] = driver_memory()
    conf[PACKAGES_CONF] = ",".join(resolved)  # what the session has, cached or resolved
    cached = cached_jars(resolved, repositories)
    if cached:
        conf["spark.jars"] = ",".join(cached)
    else:
        conf["spark.jars.packages"] = ",".join(resolved)
        if repositories:  # consulted after Maven Central, for medallion's own POMs only
            conf["spark.jars.repositories"] = ",".join(repositories)
    if master.startswith("local"):
        # Everything runs in this one JVM: keep the driver's ports on the loopback interface.
        conf["spark.driver.bindAddress"] = "127.0.0.1"
        conf["spark.driver.host"] = "127.0.0.1"
        conf.update(local_file_system_conf())  # no chmod process per file (medallion/local_fs.py)
    conf = {**conf, **LOCAL_SPARK_CONF}
    options = " ".join(filter(None, [java, java_options(), class_archive.jvm_options()]))
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        conf[key] = with_java_options(conf[key], options)
    return {**conf, **(extra or {})}


def local_builder(
    app_name: str = "medallion",
    master: str | None = None,
    extra: dict | None = None,
    packages: Sequence[str] = (),
    java: str = "",
):
    """A SparkSession builder with :func:`local_conf`'s settings."""
    # deferred: loads pyspark
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in local_conf(app_name, master, extra, packages, java).items():
        builder = builder.config(key, value)
    return builder


def get_spark(
    app_name: str = "medallion",
    master: str | None = None,
    extra: dict | None = None,
    packages: Sequence[str] = (),
    java: str = "",
) -> SparkSession:
    """Return a SparkSession, choosing in order:

    1. the running session on a Databricks cluster;
    2. ``DatabricksSession`` when databricks-connect is installed and configured;
    3. Spark Connect when ``SPARK_REMOTE=sc://...`` is set;
    4. otherwise local delta-spark (``local[*]``, UTC, few partitions, UI off), its JVM's
       output in a log file (:func:`jvm_log`) unless ``MEDALLION_VERBOSE`` is set.

    ``packages`` (see :func:`packages_for`) and ``java`` (see :func:`local_conf`) only
    matter for a new local session: Databricks runtimes ship the Kafka connector, and a running
    JVM cannot load more packages.
    """
    # deferred: loads pyspark
    from pyspark.sql import SparkSession

    kind = session_kind()
    if kind == "databricks":
        return SparkSession.builder.getOrCreate()
    if kind == "databricks-connect":
        # deferred: only in databricks-connect's own environment
        from databricks.connect import DatabricksSession

        return DatabricksSession.builder.getOrCreate()
    if kind == "spark-connect":
        spark = SparkSession.builder.remote(os.environ["SPARK_REMOTE"]).getOrCreate()
        spark.conf.set("spark.sql.session.timeZone", "UTC")
        return spark
    active = SparkSession.getActiveSession()
    if active is not None:
        started = active.sparkContext.getConf()
        loaded = started.get(PACKAGES_CONF, "") or started.get("spark.jars.packages", "")
        missing = [p for p in packages if p not in loaded.split(",")]
        if missing:
            log.warning("the running Spark session was started without %s", ", ".join(missing))
        return active
    conf = local_conf(app_name, master, {**INTERPRETED_QUERIES, **(extra or {})}, packages, java)
    resolving = "spark.jars.packages" in conf
    if resolving:
        print(_download_line(conf["spark.jars.packages"].split(",")), file=sys.stderr)
    with _driver_owns_sigterm():
        spark = _start_local(conf)
    if resolving:
        _cache_resolved_jars(spark, conf)
    quiet_spark_logs(spark)
    return spark


# What a first run downloads, to say so before it starts: Delta's jars with their dependencies
# (Hadoop's client among them), and the Kafka connector's.
_DOWNLOAD_MEGABYTES = {DELTA_MAVEN_PACKAGE: 89, KAFKA_MAVEN_PACKAGE: 12}


def _download_line(packages: Sequence[str]) -> str:
    known = [_DOWNLOAD_MEGABYTES[p] for p in packages if p in _DOWNLOAD_MEGABYTES]
    size = f"about {sum(known)} MB" if len(known) == len(packages) else "size unknown"
    return (
        f"medallion: first run on this machine: fetching the jars of {', '.join(packages)} and "
        f"their dependencies ({size}) from Maven Central into {cache_root()}"
    )


def _cache_resolved_jars(spark: SparkSession, conf: dict[str, str]) -> None:
    """Keep the jars Ivy resolved for this session, so later sessions load them directly."""
    resolved = [j for j in spark.sparkContext.getConf().get("spark.jars", "").split(",") if j]
    packages = conf["spark.jars.packages"].split(",")
    repositories = [r for r in conf.get("spark.jars.repositories", "").split(",") if r]
    try:
        store_jars(packages, repositories, resolved)
    except OSError as error:  # the run goes on; the next one resolves again
        log.warning("could not cache the resolved jars: %s", error)


JVM_LOG_FOLDER_VARIABLE = "MEDALLION_LOG_DIR"
_KEPT_LOGS = 20
_jvm_log: Path | None = None


def jvm_log() -> Path | None:
    """The file that keeps this process's JVM output (None when it goes to the console)."""
    return _jvm_log


def _log_folder() -> Path:
    if os.environ.get(JVM_LOG_FOLDER_VARIABLE):
        return Path(os.environ[JVM_LOG_FOLDER_VARIABLE]).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(base) / "medallion" / "logs"


def _start_local(conf: dict[str, str]) -> SparkSession:
    """Start the local JVM with ``conf``, its stdout and stderr in a new log file (the latest
    ones are kept) unless ``MEDALLION_VERBOSE`` is set, then the session on it."""
    # Python workers (an erasure's keyed hashes) run this interpreter, whose packages they
    # need (pyarrow), not the PATH's python3, which pyspark takes by default.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    global _jvm_log
    # deferred: loads pyspark
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    spark_conf = SparkConf(loadDefaults=False).setAll(list(conf.items()))
    if os.environ.get("MEDALLION_VERBOSE"):
        gateway = launch_gateway(spark_conf)
    else:
        folder = _log_folder()
        folder.mkdir(parents=True, exist_ok=True)
        for old in sorted(folder.glob("spark-*.log"))[: -_KEPT_LOGS + 1]:
            old.unlink(missing_ok=True)
        _jvm_log = folder / f"spark-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
        with _jvm_log.open("ab") as output:
            popen = {"stdout": output, "stderr": subprocess.STDOUT}
            gateway = launch_gateway(spark_conf, popen_kwargs=popen)
        _details_to(_jvm_log)
    SparkContext(conf=spark_conf, gateway=gateway)
    return SparkSession.builder.getOrCreate()


def _details_to(path: Path) -> None:
    """Keep this process's log records, tracebacks included, in ``path`` (the JVM's log), and
    PySpark's records of a failed query's context there rather than on stderr: the console
    says a failure in one line (medallion/cli.py), ``-v`` shows it all."""
    # deferred: loads pyspark
    from pyspark.logger import PySparkLogger

    console.keep_details(path)
    for name in ("DataFrameQueryContextLogger", "SQLQueryContextLogger"):
        logger = PySparkLogger.getLogger(name)  # its own stderr handler; it does not propagate
        for handler in logger.handlers[:]:
            logger.removeHandler(handler)
        logger.addHandler(logging.FileHandler(path, encoding="utf-8"))


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
