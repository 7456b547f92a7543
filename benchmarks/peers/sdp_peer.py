"""The Spark Declarative Pipelines (SDP) peer of medallion, for the benchmarks.

    python benchmarks/peers/sdp_peer.py --landing DIR --workdir DIR

Runs medallion's bronze -> silver -> gold (benchmarks/peers/sdp/) with ``spark-pipelines run``
on Delta, then reads the resulting tables with the ``deltalake`` package (no JVM) and prints one
final stdout line, ``BENCH_RESULT {json}``. Everything else (the pipeline's own output included)
goes to stderr, and to ``<workdir>/pipeline.log``.

The work dir gets ``pipeline/`` (the filled-in spec and a copy of the definitions),
``storage/`` (the pipeline's checkpoints) and ``warehouse/`` (the tables, one folder each:
``warehouse/<table>``). ``storage/`` and ``warehouse/`` are emptied first: every run is a fresh
full run over the whole landing folder.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
PROJECT = Path(__file__).resolve().parent / "sdp"
VENV_BIN = REPO / ".venv" / "bin"

sys.path.insert(0, str(REPO / "src"))  # medallion, when not run from the project's venv
from common import finish, gold_totals  # noqa: E402

from medallion.jvm_options import driver_memory  # noqa: E402
from medallion.session import DELTA_MAVEN_PACKAGE, LOCAL_SPARK_CONF  # noqa: E402

MASTER = "local[2]"
LANDING_CONF = "spark.medallion.sdp.landing"  # read by sdp/transformations/medallion_flows.py
TABLES = {
    "bronze": "bronze_events",
    "silver": "silver_events",
    "gold": "gold_hourly_product_metrics",
}

# "2026-11-21 18:40:01: Flow spark_catalog.default.bronze_events is RUNNING." (UTC, seconds)
EVENT_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d): (.*)$")
FLOW_STATE = re.compile(r"Flow [`']?(?P<flow>[\w.`]+?)[`']? (?:is|has) (?P<state>[A-Z_]+)")


def log(message: str) -> None:
    print(f"[sdp_peer] {message}", file=sys.stderr, flush=True)


# Session-level SQL confs of LOCAL_SPARK_CONF that the spec's configuration repeats: the flows
# run with the spec's configuration set on their sessions, so it may hold runtime confs only
# (a static one such as spark.sql.warehouse.dir fails every flow: CANNOT_MODIFY_STATIC_CONFIG).
SPEC_SQL_CONFS = ("spark.sql.session.timeZone", "spark.sql.shuffle.partitions")


def jvm_conf(workdir: Path) -> dict[str, str]:
    """The confs the Spark JVM starts with: medallion's LOCAL_SPARK_CONF plus the tables' place."""
    conf = dict(LOCAL_SPARK_CONF)
    conf.update(
        {
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.host": "127.0.0.1",
            "spark.sql.warehouse.dir": (workdir / "warehouse").as_uri(),
            # No Hive metastore (Derby): tables are found by path afterwards.
            "spark.sql.catalogImplementation": "in-memory",
        }
    )
    return conf


def submit_args(workdir: Path) -> str:
    """PYSPARK_SUBMIT_ARGS for the JVM that runs Spark.

    ``spark-pipelines --remote local[2]`` is a launcher JVM (SparkPipelines -> SparkSubmit) that
    runs the CLI's Python; that Python starts the real Spark JVM (the Spark Connect server,
    driver and local[2] executors) with ``spark-submit ... $PYSPARK_SUBMIT_ARGS``. So the Delta
    package, driver memory and static confs go there. (Confs given to spark-pipelines itself
    reach that JVM only partly: pyspark keeps only the last chunk of its
    PYSPARK_REMOTE_INIT_CONF_<i> variables; the spec's configuration is also set on every
    flow's session, where static confs fail.)
    """
    args = ["--driver-memory", driver_memory(), "--packages", DELTA_MAVEN_PACKAGE]
    for key, value in jvm_conf(workdir).items():
        args += ["--conf", f"{key}={value}"]
    return shlex.join([*args, "pyspark-shell"])


def prepare(landing: Path, workdir: Path) -> Path:
    """Fill in the spec template for this work dir; return the spec's path."""
    for name in ("pipeline", "storage", "warehouse"):
        shutil.rmtree(workdir / name, ignore_errors=True)
    pipeline = workdir / "pipeline"
    shutil.copytree(
        PROJECT / "transformations",
        pipeline / "transformations",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (workdir / "storage").mkdir(parents=True)
    spec = yaml.safe_load((PROJECT / "spark-pipeline.yml").read_text())
    spec["storage"] = (workdir / "storage").as_uri()
    spec["configuration"] = {
        **(spec.get("configuration") or {}),
        **{key: LOCAL_SPARK_CONF[key] for key in SPEC_SQL_CONFS},
        LANDING_CONF: str(landing),
    }
    path = pipeline / "spark-pipeline.yml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def command(spec: Path) -> list[str]:
    cli = VENV_BIN / "spark-pipelines"
    # SparkPipelines hands --remote to spark-submit: "local[2]" makes the CLI's Python start a
    # local Spark Connect server (in a JVM of its own) with master local[2].
    return [
        str(cli) if cli.exists() else "spark-pipelines",
        "--remote",
        MASTER,
        "run",
        "--spec",
        str(spec),
    ]


def spark_home() -> str:
    """The pip-installed pyspark's folder (found without importing pyspark)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise SystemExit("pyspark is not installed in this Python")
    return str(Path(spec.origin).parent)


def environment(workdir: Path) -> dict[str, str]:
    python = VENV_BIN / "python"
    python = str(python if python.exists() else Path(sys.executable))
    env = dict(os.environ)
    env.update(
        {
            "SPARK_HOME": spark_home(),
            "PYSPARK_PYTHON": python,
            "PYSPARK_DRIVER_PYTHON": python,
            "PYSPARK_SUBMIT_ARGS": submit_args(workdir),
            "PYTHONUNBUFFERED": "1",  # pipeline events arrive when they happen
            "TZ": "UTC",
        }
    )
    env.pop("SPARK_REMOTE", None)
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    return env


def run_pipeline(cmd: list[str], workdir: Path) -> tuple[int, float, list[tuple[float, str]], int]:
    """Run the CLI; return its exit code, wall time, stdout lines stamped on arrival, pid."""
    lines: list[tuple[float, str]] = []
    with open(workdir / "pipeline.log", "w") as out:
        out.write(" ".join(cmd) + "\n")
        out.flush()
        start = time.monotonic()
        proc = subprocess.Popen(
            cmd,
            cwd=workdir,
            env=environment(workdir),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

        def pump(stream, stamped: bool) -> None:
            for line in stream:
                if stamped:
                    lines.append((time.monotonic() - start, line.rstrip("\n")))
                out.write(line)
                sys.stderr.write(line)
            stream.close()

        threads = [
            threading.Thread(target=pump, args=(proc.stdout, True)),
            threading.Thread(target=pump, args=(proc.stderr, False)),
        ]
        for t in threads:
            t.start()
        code = proc.wait()
        wall = time.monotonic() - start
        for t in threads:
            t.join()
    return code, wall, lines, proc.pid


def timings(lines: list[tuple[float, str]]) -> tuple[float | None, dict[str, float]]:
    """``pipeline_s`` and per-flow seconds from the CLI's output.

    Each line is stamped when the runner reads it; the CLI prints the server's events as they
    stream in, so the stamps have sub-second resolution (the events' own timestamps are
    printed to the second). ``pipeline_s`` runs from the CLI's "Starting run..." (graph
    registered; JVM, Spark Connect server and session already up) to the run's last event.
    A flow runs from its first event after QUEUED (STARTING/PLANNING/RUNNING) to COMPLETED.
    """
    run_start = run_end = None
    first: dict[str, float] = {}
    done: dict[str, float] = {}
    for stamp, line in lines:
        match = EVENT_LINE.match(line)
        if not match:
            continue
        message = match.group(2)
        if message.startswith("Starting run"):
            run_start = stamp
        elif re.match(r"Run (is|has) (COMPLETED|FAILED|CANCELED)", message):
            run_end = stamp
        flow = FLOW_STATE.search(message)
        if flow:
            name = flow.group("flow").replace("`", "").split(".")[-1]
            state = flow.group("state")
            if state in ("STARTING", "PLANNING", "RUNNING") and name not in first:
                first[name] = stamp
            elif state == "COMPLETED":
                done[name] = stamp
    pipeline_s = None
    if run_start is not None and run_end is not None:
        pipeline_s = round(run_end - run_start, 3)
    flows = {n: round(done[n] - first[n], 3) for n in done if n in first}
    return pipeline_s, flows


def event_seconds(lines: list[tuple[float, str]]) -> float | None:
    """The run's span by the events' own (whole-second) timestamps, as a cross-check."""
    times = [
        datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")
        for _, line in lines
        if (m := EVENT_LINE.match(line))
    ]
    return (max(times) - min(times)).total_seconds() if times else None


def table_path(workdir: Path, name: str) -> Path:
    path = workdir / "warehouse" / name
    if (path / "_delta_log").is_dir():
        return path
    found = sorted(str(p.parent) for p in workdir.rglob("_delta_log"))
    raise SystemExit(
        f"no Delta table {name!r} at {path}; Delta tables under {workdir}: {found or 'none'}"
    )


def read_results(workdir: Path) -> dict:
    from deltalake import DeltaTable

    def rows(name: str) -> int:
        return DeltaTable(str(table_path(workdir, name))).to_pyarrow_table(columns=[]).num_rows

    return {
        "silver_rows": rows(TABLES["silver"]),
        "bronze_rows": rows(TABLES["bronze"]),
        "gold": gold_totals(str(table_path(workdir, TABLES["gold"]))),
    }


def main() -> int:
    """Run the pipeline; ends the process with the result, or returns the failed exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--landing", required=True, type=Path, help="medallion's landing folder")
    parser.add_argument("--workdir", required=True, type=Path, help="folder for spec and tables")
    args = parser.parse_args()
    landing = args.landing.resolve()
    workdir = args.workdir.resolve()
    if not (landing / "events").is_dir():
        parser.error(f"no events folder under {landing}")
    workdir.mkdir(parents=True, exist_ok=True)

    spec = prepare(landing, workdir)
    cmd = command(spec)
    log(f"running: {' '.join(cmd)}")
    code, wall, lines, pid = run_pipeline(cmd, workdir)
    log(f"spark-pipelines exited {code} after {wall:.3f}s")
    if code != 0:
        log(f"the pipeline failed; its output is in {workdir / 'pipeline.log'}")
        return code
    pipeline_s, flows_s = timings(lines)
    result = {
        "peer": "sdp",
        "wall_s": round(wall, 3),
        "pipeline_s": pipeline_s,
        "flows_s": flows_s,
        **read_results(workdir),
        "pid_note": (
            f"spark-pipelines pid {pid} is a launcher JVM (bash exec's spark-class SparkPipelines "
            "-> SparkSubmit, default -Xmx1g, idle during the run) whose child is the CLI's Python "
            "(cli.py), whose child is the Spark JVM (spark-submit pyspark-shell, -Xmx2g: Spark "
            "Connect server, driver, local[2] executors): two JVMs in the tree. pipeline_s: "
            "'Starting run...' to 'Run is COMPLETED' (JVMs up, graph registered); flows_s: first "
            "PLANNING/STARTING/RUNNING to COMPLETED, stamped on arrival; event-timestamp span "
            f"{event_seconds(lines)}s (1s resolution)"
        ),
    }
    finish(result)


if __name__ == "__main__":
    sys.exit(main())  # a completed run ends in finish()
