"""``medallion run`` on an existing Spark cluster: a standalone master and two 1-core workers.

The cluster is pyspark's own (``bin/spark-class``, tests/spark_cluster.py), everything on
127.0.0.1 (``SPARK_LOCAL_IP``). One delivery of a few thousand events and customer changes is
processed by the real CLI with ``MEDALLION_SPARK_MASTER=spark://127.0.0.1:PORT``; every table
must equal the oracle, the work must have run in both workers' executors, and no process of
the cluster or of the run may listen beyond the loopback interface. See docs/cluster.md.
"""

from __future__ import annotations

import subprocess
import threading
import time

import pytest
from history_oracle import expected_revenue_at_purchase, landed_changes
from lake_checks import (
    assert_change_feed_audited,
    assert_customers_match,
    assert_lake_matches,
    daily_revenue,
)
from oracle import expected_customers, expected_from
from processes import MEDALLION, kill_group, run_medallion, wait_until
from spark_cluster import SparkStandaloneCluster, is_loopback, listening_sockets, loopback_env

from medallion.config import Config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


@pytest.fixture
def cluster(tmp_path):
    """A master and two workers (1 core, 1g each) on 127.0.0.1, all killed afterwards."""
    with SparkStandaloneCluster(tmp_path / "cluster", workers=2, cores=1, memory="1g") as running:
        yield running


def test_one_delivery_on_a_standalone_cluster_equals_the_oracle(spark, cluster, tmp_path):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    generated = run_medallion(
        *("generate", "--landing", str(landing), "--events", "1000", "--customers", "100"),
        *("--files", "2", "--seed", "23", "--pipeline", "retail"),
    )
    assert generated.returncode == 0, generated.stderr

    env = loopback_env()
    env["MEDALLION_SPARK_MASTER"] = cluster.master_url
    env["MEDALLION_DRIVER_MEMORY"] = "1g"  # the executors do the work
    log_path = tmp_path / "run.log"
    with open(log_path, "wb") as log:
        run = subprocess.Popen(
            [MEDALLION, "run", "--landing", str(landing), "--lake", str(lake)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )

    # Every listening socket of the run (driver) and of the cluster (daemons, executors).
    listeners: set[tuple[int, int, str, int]] = set()
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            listeners.update(listening_sockets(cluster.pgids() | {run.pid}))
            done.wait(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.monotonic()
    try:
        returncode = run.wait(timeout=1200)
    finally:
        if run.poll() is None:
            kill_group(run)
        done.set()
        sampler.join()
    seconds = time.monotonic() - started
    output = log_path.read_text(errors="replace")
    assert returncode == 0, output[-4000:]
    print(f"medallion run on the cluster: {seconds:.1f} s")

    # The run was a cluster application, and both workers' executors ran its tasks.
    assert wait_until(
        lambda: any(app["name"] == "medallion" for app in cluster.status()["completedapps"]),
        timeout=60,
        interval=0.5,
    ), cluster.status()
    for index in (1, 2):
        stderr = cluster.executor_logs(index)
        assert stderr, f"worker {index} launched no executor"
        tasks = sum(path.read_text(errors="replace").count("Finished task") for path in stderr)
        assert tasks > 0, f"worker {index}'s executor ran no task"

    # Nothing bound beyond loopback: the driver, the daemons and the executors.
    workers = {cluster.processes[f"worker-{index}"].pid for index in (1, 2)}
    executors = {pgid for pgid, pid, _, _ in listeners if pgid in workers and pid != pgid}
    assert executors == workers, f"an executor's sockets were never sampled: {sorted(listeners)}"
    assert any(pgid == run.pid for pgid, _, _, _ in listeners), "the driver's were never sampled"
    wide = sorted(entry for entry in listeners if not is_loopback(entry[2]))
    assert not wide, f"listening beyond loopback: {wide}"
    print(f"{len(listeners)} listening sockets seen, all on loopback")

    checks = time.monotonic()
    config = Config(landing=str(landing), lake=str(lake))
    events, customers = expected_from(landing), expected_customers(landing)
    assert_lake_matches(spark, config, events)
    assert_customers_match(spark, config, customers)
    assert_change_feed_audited(spark, config)
    changes = landed_changes(landing)
    assert daily_revenue(spark, config) == expected_revenue_at_purchase(events.silver, changes)
    print(f"lake checks against the oracle: {time.monotonic() - checks:.1f} s")
