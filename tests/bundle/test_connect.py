"""The pipeline through Spark Connect: a local Connect server with Delta, on 127.0.0.1.

pyspark 4.2.0 ships the Connect server (jars/spark-connect_2.13-4.2.0.jar) but not
sbin/start-connect-server.sh, so the server starts as that script would: spark-submit of
org.apache.spark.sql.connect.service.SparkConnectServer, with the Delta jars and the same
session settings as local runs. Delta's Connect plugin (io.delta:delta-connect-server) is not
published for Spark 4.2 on Maven Central, so the server has none: the pipeline reaches Delta
only through SQL and DataFrame reads and writes, which is what this test proves.

The triggered pipeline job runs with ``SPARK_REMOTE`` set, its notebooks' kernels holding only
Connect clients, on the landing files the local runs processed (``local_jobs``); the tables
must equal theirs, row for row.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyspark
import pytest
from bundle_support import ROOT, comparable_snapshot

from medallion.config import Config
from medallion.session import LOCAL_SPARK_CONF, java_options, local_conf, local_packages

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
MEDALLION = str(Path(sys.executable).with_name("medallion"))
CONNECT_SERVER = "org.apache.spark.sql.connect.service.SparkConnectServer"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _jars() -> tuple[str, str]:
    """The server's jars: the jar cache's files when it has them, else Maven packages."""
    conf = local_conf()
    if "spark.jars" in conf:
        return "--jars", conf["spark.jars"]
    return "--packages", ",".join(local_packages())


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory):
    """A Spark Connect server with Delta on 127.0.0.1, stopped after the module."""
    spark_home = Path(pyspark.__file__).parent
    port = free_port()
    settings = {
        **LOCAL_SPARK_CONF,
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        # Spark's own logging (INFO): the test reads which streams ran in the server.
        "spark.driver.extraJavaOptions": f"-Duser.timezone=UTC {java_options()}",
    }
    command = [
        str(spark_home / "bin" / "spark-submit"),
        *("--class", CONNECT_SERVER, "--name", "medallion-connect-test"),
        *("--master", "local[2]", "--driver-memory", "2g"),
        *_jars(),
        *[arg for key, value in settings.items() for arg in ("--conf", f"{key}={value}")],
        "spark-internal",
    ]
    # The server runs foreachBatch functions in Python workers: this interpreter, with medallion.
    env = {**os.environ, "SPARK_HOME": str(spark_home), "PYSPARK_PYTHON": sys.executable}
    env.pop("SPARK_REMOTE", None)
    log_path = tmp_path_factory.mktemp("connect") / "server.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 600
        while not _listening(port):
            if server.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(errors="replace")[-3000:]
                pytest.fail(f"the Spark Connect server did not start:\n{tail}")
            time.sleep(1)
        yield f"sc://127.0.0.1:{port}", log_path
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def test_the_pipeline_job_through_spark_connect_matches_the_local_run(
    spark, local_jobs, connect_url, tmp_path
):
    url, server_log = connect_url
    lake = tmp_path / "lake"
    env = {**os.environ, "SPARK_REMOTE": url}
    places = ["--landing", str(local_jobs.landing), "--lake", str(lake)]
    command = [MEDALLION, "job", "--bundle", str(ROOT), "run", "medallion_pipeline", *places]
    result = subprocess.run(
        [*command, "--output", str(tmp_path / "runs")],
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "job medallion_pipeline: 3 tasks succeeded" in result.stdout

    # The streams ran in the server, not in the kernels.
    log = server_log.read_text(errors="replace")
    assert "bronze_events" in log and "gold_daily_revenue_by_country" in log
    bronze = (tmp_path / "runs" / "bronze.ipynb").read_text()
    assert "delta-spark_4.2" not in bronze  # no local session resolved the Delta jars

    connect_config = Config(landing=str(local_jobs.landing), lake=str(lake))
    assert comparable_snapshot(spark, connect_config) == local_jobs.snapshots["maintenance"]
