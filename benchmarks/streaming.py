"""Latency and recovery of a ``medallion run --stream``, measured from outside the process.

Files of generated events land at a fixed rate while the run streams. When a file's rows
became queryable is read from the Delta logs afterwards (:func:`measure.visible_times`):
silver's MERGE commit that added them, and gold's first commit whose batch read that silver
version. Latency is that commit time minus the file's landing time (its atomic rename).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from measure import (
    PYTHON,
    REPO,
    TreeSampler,
    gold_batches,
    kill_tree,
    percentile,
    tutorial_visible_times,
    visible_times,
)

from medallion.generate import FaultRates, write_file_atomically
from medallion.pipelines.retail.generator import generate_event_lines

MEDALLION = [PYTHON, "-m", "medallion.cli"]


class Feeder:
    """Lands one file of ``events`` generated events every ``period`` seconds, on a fixed
    schedule, in a background thread; ``landed`` maps file name -> landing time (epoch s)."""

    def __init__(self, landing: str, events: int, period: float, faults: FaultRates) -> None:
        self.directory = f"{landing}/events"
        self.events = events
        self.period = period
        self.faults = faults
        self.landed: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="feeder", daemon=True)
        self._seq = 0

    def land_one(self) -> str:
        self._seq += 1
        seed = 10_000 + self._seq
        lines = list(generate_event_lines(self.events, seed, faults=self.faults))
        name = f"stream-{seed}.json"
        write_file_atomically(self.directory, name, lines)
        self.landed[name] = time.time()
        return name

    def start(self) -> Feeder:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.land_one()
            next_at += self.period
            self._stop.wait(max(0.0, next_at - time.monotonic()))


# The peer pipelines the latency part streams beside medallion, and their layers: ``tutorial``,
# three plain Delta streams without validation; ``floor``, its bronze stream alone, each file's
# lines appended to one Delta table (benchmarks/peers/tutorial.py --stream LAYERS).
TUTORIAL = [PYTHON, "benchmarks/peers/tutorial.py"]
PEER_STREAMS = {"tutorial": "bronze,silver,gold", "floor": "bronze"}


def _start_stream(
    landing: str, lake: str, log: Path, interval: float | None, pipeline: str = "medallion"
) -> subprocess.Popen:
    if pipeline in PEER_STREAMS:
        command = [*TUTORIAL, "--landing", landing, "--workdir", lake, "--stream"]
        command.append(PEER_STREAMS[pipeline])
    else:
        command = [*MEDALLION, "run", "--landing", landing, "--lake", lake, "--stream"]
    if interval is not None:
        command += ["--interval", str(interval)]
    env = {**os.environ, "MEDALLION_SPARK_MASTER": "local[2]"}
    return subprocess.Popen(
        command,
        cwd=REPO,
        stdout=open(log, "a"),  # noqa: SIM115 - the child owns it
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )


def _wait_visible(
    lake: str, names: dict[str, float], layer: str, timeout: float, visible=visible_times
) -> bool:
    """Wait until every file in ``names`` is visible in ``layer`` (by ``visible``, as
    :func:`measure.visible_times`); False on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if set(names) <= set(visible(lake, names)[layer]):
                return True
        except (OSError, ValueError, KeyError):
            pass  # a commit or offsets file being written; read again
        time.sleep(0.5)
    return False


def _warm_up(lake: str, feeder: Feeder, visible=visible_times, layer: str = "gold") -> None:
    """Land one file and wait until it is in ``layer``, the last: then every stream is up."""
    warmup = feeder.land_one()
    if not _wait_visible(lake, {warmup: 0.0}, layer, timeout=300, visible=visible):
        raise RuntimeError(f"the stream never made its first file visible in {lake}")


def _stop_stream(process: subprocess.Popen, timeout: float = 90) -> int:
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        kill_tree(process)
        return process.wait()


def _summary(values: list[float]) -> dict:
    return {
        "files": len(values),
        "p50_s": _round(percentile(values, 50)),
        "p95_s": _round(percentile(values, 95)),
        "p99_s": _round(percentile(values, 99)),
        "max_s": _round(max(values) if values else None),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def measure_latency(
    workdir: Path,
    seconds: float,
    events_per_file: int = 1000,
    interval: float | None = None,
    faults: FaultRates | None = None,
    pipeline: str = "medallion",
) -> dict:
    """Stream while a file of ``events_per_file`` events lands every second for ``seconds``;
    landing-to-visible percentiles per layer, and the run's peak memory. ``pipeline`` is
    ``medallion`` (``medallion run --stream``) or a peer of :data:`PEER_STREAMS`."""
    faults = faults or FaultRates()
    landing, lake = str(workdir / "landing"), str(workdir / "lake")
    process = _start_stream(landing, lake, workdir / "stream.log", interval, pipeline)
    visible = tutorial_visible_times if pipeline in PEER_STREAMS else visible_times
    last = PEER_STREAMS.get(pipeline, "gold").split(",")[-1]  # the layer a file reaches last
    feeder = Feeder(landing, events_per_file, 1.0, faults)
    with TreeSampler(process.pid) as sampler:
        try:
            _warm_up(lake, feeder, visible, last)
            warm = dict(feeder.landed)
            feeder.start()
            time.sleep(seconds)
            feeder.stop()
            timed = {k: v for k, v in feeder.landed.items() if k not in warm}
            caught_up = _wait_visible(lake, timed, last, timeout=120, visible=visible)
        finally:
            exit_code = _stop_stream(process)
    latencies = visible(lake, timed)
    return {
        "pipeline": pipeline,
        "seconds": seconds,
        "files": len(timed),
        "events_per_file": events_per_file,
        "interval_s": interval,
        "caught_up": caught_up,
        "exit_code": exit_code,
        "layers": {layer: _summary(list(latencies[layer].values())) for layer in latencies},
        "gold_batches": gold_batches(lake),
        "peak_total_rss_mb": round(sampler.peaks.total_rss_mb),
        "peak_jvm_heap_used_mb": round(sampler.peaks.jvm_heap_used_mb),
    }


def _latest_batch_commit(lake: str) -> float:
    """The newest modification time of any stream's batch commit file (0 if none)."""
    times = [p.stat().st_mtime for p in Path(lake, "_checkpoints").glob("*/commits/[0-9]*")]
    return max(times, default=0.0)


def measure_recovery(
    workdir: Path,
    steady_seconds: float,
    downtime_seconds: float = 3.0,
    events_per_file: int = 1000,
    faults: FaultRates | None = None,
) -> dict:
    """SIGKILL a steadily streaming run (files keep landing, one a second), restart it, and
    time the restart to its first committed batch and to full catch-up in gold."""
    faults = faults or FaultRates()
    landing, lake = str(workdir / "landing"), str(workdir / "lake")
    log = workdir / "stream.log"
    process = _start_stream(landing, lake, log, None)
    feeder = Feeder(landing, events_per_file, 1.0, faults)
    try:
        _warm_up(lake, feeder)
        feeder.start()
        time.sleep(steady_seconds)
        kill_tree(process)  # the Python driver and its JVM, mid-flight
        process.wait()
        killed_at = time.time()
        time.sleep(downtime_seconds)
        restarted_at = time.time()
        process = _start_stream(landing, lake, log, None)
        first_batch_at = None
        backlog = dict(feeder.landed)  # everything landed before the restart
        deadline = time.monotonic() + 600
        while first_batch_at is None and time.monotonic() < deadline:
            if _latest_batch_commit(lake) > restarted_at:
                first_batch_at = time.time()
            time.sleep(0.1)
        caught_up = _wait_visible(lake, backlog, "gold", timeout=600)
        caught_up_at = time.time()
        feeder.stop()
    finally:
        exit_code = _stop_stream(process)
    return {
        "steady_seconds": steady_seconds,
        "downtime_s": round(restarted_at - killed_at, 2),
        "backlog_files": len(backlog),
        "restart_to_first_batch_s": _round(first_batch_at and first_batch_at - restarted_at),
        "restart_to_caught_up_s": _round(caught_up_at - restarted_at) if caught_up else None,
        "exit_code": exit_code,
    }


def _executed_batches(lake: str, query: str) -> list[dict]:
    """The executed batches of one stream, oldest first, from ``_system/stream_progress``."""
    from deltalake import DeltaTable

    table = DeltaTable(f"{lake}/_system/stream_progress").to_pyarrow_table(
        columns=["query_name", "batch_id", "num_input_rows", "duration_ms"]
    )
    batches = []
    for row in table.to_pylist():
        durations = dict(row["duration_ms"] or [])
        if row["query_name"] == query and "addBatch" in durations and row["num_input_rows"]:
            batches.append({"batch": row["batch_id"], "rows": row["num_input_rows"], **durations})
    return sorted(batches, key=lambda b: b["batch"])


def measure_growth(
    workdir: Path,
    seconds: float,
    events_per_file: int = 2000,
    windows: int = 5,
    faults: FaultRates | None = None,
) -> dict:
    """Stream for ``seconds`` while a file of ``events_per_file`` events lands every second;
    then each batch's time against the lines ingested before it, in ``windows`` spans of the
    run: flat when a batch costs the same on a small lake and on a large one."""
    faults = faults or FaultRates()
    landing, lake = str(workdir / "landing"), str(workdir / "lake")
    process = _start_stream(landing, lake, workdir / "stream.log", None)
    feeder = Feeder(landing, events_per_file, 1.0, faults)
    try:
        _warm_up(lake, feeder)
        feeder.start()
        time.sleep(seconds)
        feeder.stop()
        _wait_visible(lake, dict(feeder.landed), "gold", timeout=300)
    finally:
        exit_code = _stop_stream(process)
    batches = _executed_batches(lake, "bronze_events")[1:]  # the warm-up file's batch
    before = 0
    for batch in batches:
        batch["lines_before"] = before
        before += batch["rows"]
    size = max(1, len(batches) // windows)
    spans = []
    for start in range(0, size * windows, size):
        part = batches[start : start + size]
        if not part:
            break
        ms = sorted(b["triggerExecution"] for b in part)
        spans.append(
            {
                "lines_before": part[0]["lines_before"],
                "batches": len(part),
                "median_batch_s": round(ms[len(ms) // 2] / 1000, 3),
                "median_rows": sorted(b["rows"] for b in part)[len(part) // 2],
            }
        )
    first, last = spans[0]["median_batch_s"], spans[-1]["median_batch_s"]
    return {
        "seconds": seconds,
        "events_per_file": events_per_file,
        "exit_code": exit_code,
        "batches": len(batches),
        "lines": before,
        "windows": spans,
        "last_over_first": round(last / first, 3) if first else None,
    }
