"""The pipeline through Spark Connect: a Connect server with Delta, on 127.0.0.1.

pyspark 4.2.0 ships the Connect server (jars/spark-connect_2.13-4.2.0.jar). The server starts
inside the test run's own session (``SparkConnectService.start`` on its SparkContext), as
``start-connect-server.sh`` would start it in a JVM of its own: the same Delta jars and session
settings as local runs, a JVM that the other tests have already warmed, and no second one to
start. Delta's Connect plugin (io.delta:delta-connect-server) is not published for Spark 4.2 on
Maven Central, so the server has none: the pipeline reaches Delta only through SQL and
DataFrame reads and writes, which is what this test proves.

The triggered pipeline job runs with ``SPARK_REMOTE`` set, its notebooks' kernels holding only
Connect clients, on the landing files the local runs processed (``local_jobs``); the tables
must equal theirs, row for row.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bundle_support import ROOT, comparable_snapshot

from medallion.config import Config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
MEDALLION = str(Path(sys.executable).with_name("medallion"))
# Streams whose own thread runs Spark jobs (a Delta sink's write, a change feed's first read),
# which the server then describes by the stream's name; a foreachBatch function's jobs carry
# the Connect session's description instead.
RETAIL_STREAMS = ("bronze_customers", "gold_customer_changes")


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


@pytest.fixture(scope="module")
def connect_url(spark):
    """A Spark Connect server on 127.0.0.1 in the shared session's JVM, stopped after the
    module. Its foreachBatch functions run in Python workers of ``PYSPARK_PYTHON``, which
    tests/conftest.py sets to this interpreter before the JVM starts."""
    context = spark.sparkContext._jsc.sc()
    port = free_port()
    context.conf().set("spark.connect.grpc.binding.address", "127.0.0.1")
    context.conf().set("spark.connect.grpc.binding.port", str(port))
    service = spark.sparkContext._jvm.org.apache.spark.sql.connect.service.SparkConnectService
    service.start(context)
    try:
        deadline = time.monotonic() + 120
        while not _listening(port):
            if time.monotonic() > deadline:
                pytest.fail(f"the Spark Connect server did not listen on 127.0.0.1:{port}")
            time.sleep(0.2)
        yield f"sc://127.0.0.1:{port}"
    finally:
        # stop(timeout, unit): Scala's default arguments, which Python cannot leave out.
        service.stop(getattr(service, "stop$default$1")(), getattr(service, "stop$default$2")())


def _jobs(spark) -> dict[int, str]:
    """The shared JVM's Spark jobs that it still remembers: id -> description ("" when none).
    A streaming batch's job is described by its query's name."""
    jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None)
    found = {}
    for index in range(jobs.size()):
        job = jobs.apply(index)
        found[job.jobId()] = job.description().get() if job.description().isDefined() else ""
    return found


def test_the_pipeline_job_through_spark_connect_matches_the_local_run(
    spark, local_jobs, connect_url, tmp_path
):
    url = connect_url
    first_job = max(_jobs(spark), default=-1)
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
    described = "\n".join(text for job, text in _jobs(spark).items() if job > first_job)
    assert any(name in described for name in RETAIL_STREAMS), described[-2000:]
    bronze = (tmp_path / "runs" / "bronze.ipynb").read_text()
    assert "delta-spark_4.2" not in bronze  # no local session resolved the Delta jars

    connect_config = Config(landing=str(local_jobs.landing), lake=str(lake))
    assert comparable_snapshot(spark, connect_config) == local_jobs.snapshots["maintenance"]
