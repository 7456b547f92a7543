"""Measuring tools shared by the benchmarks: child processes with their peak memory, and
when landed files became visible in a Delta table (read from the table's log, no JVM)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pyarrow.parquet as pq
from peers.common import RESULT_PREFIX

from medallion.delta_log import commit_tags

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


@dataclass
class Peaks:
    """Peak memory of a process tree: the Python driver, its JVM(s), and the JVM heap in use."""

    python_rss_mb: float = 0.0
    jvm_rss_mb: float = 0.0
    total_rss_mb: float = 0.0
    jvm_heap_used_mb: float = 0.0


class TreeSampler:
    """Samples a process tree every ``interval`` seconds until stopped.

    RSS comes from psutil; the JVM heap in use (eden + survivors + old generation) from
    ``jstat -gc``, which reads the JVM's performance counters without touching its threads.
    """

    def __init__(self, pid: int, interval: float = 0.25) -> None:
        self.pid = pid
        self.interval = interval
        self.peaks = Peaks()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-sampler", daemon=True)
        self._last_heap_probe = 0.0

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def _sample(self) -> None:
        try:
            root = psutil.Process(self.pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return
        python = jvm = 0.0
        jvm_pids = []
        for process in tree:
            try:
                rss = process.memory_info().rss / 2**20
                name = process.name()
            except psutil.NoSuchProcess:
                continue
            if name == "java":
                jvm += rss
                jvm_pids.append(process.pid)
            elif process.pid == self.pid:
                python += rss
        peaks = self.peaks
        peaks.python_rss_mb = max(peaks.python_rss_mb, python)
        peaks.jvm_rss_mb = max(peaks.jvm_rss_mb, jvm)
        peaks.total_rss_mb = max(peaks.total_rss_mb, python + jvm)
        if jvm_pids and time.monotonic() - self._last_heap_probe >= 1.0:
            self._last_heap_probe = time.monotonic()
            heap = sum(_jvm_heap_used_mb(pid) for pid in jvm_pids)
            peaks.jvm_heap_used_mb = max(peaks.jvm_heap_used_mb, heap)


# The JVM's heap counters, as jstat -gc reads them: eden, both survivors, the old generation.
_HEAP_COUNTERS = (
    "sun.gc.generation.0.space.0.used",
    "sun.gc.generation.0.space.1.used",
    "sun.gc.generation.0.space.2.used",
    "sun.gc.generation.1.space.0.used",
)


def _jvm_heap_used_mb(pid: int) -> float:
    """Heap in use of one JVM (0 when it cannot be read), from the performance counters it
    publishes in ``/tmp/hsperfdata_<user>/<pid>``: what ``jstat -gc`` reads, without starting
    a JVM for ``jstat`` every time, which would steal the measured process's CPU."""
    try:
        counters = _perf_counters(pid)
    except (OSError, ValueError, struct.error):
        return 0.0
    return sum(counters.get(name, 0) for name in _HEAP_COUNTERS) / 2**20


def _perf_counters(pid: int) -> dict[str, int]:
    """The long-valued HotSpot performance counters of a JVM (its PerfData file)."""
    [path] = Path(tempfile.gettempdir()).glob(f"hsperfdata_*/{pid}")
    data = path.read_bytes()
    if data[:4] != b"\xca\xfe\xc0\xc0":
        raise ValueError("not a PerfData file")
    order = "<" if data[4] == 1 else ">"
    entry_offset, entries = struct.unpack_from(f"{order}ii", data, 24)
    counters: dict[str, int] = {}
    offset = entry_offset
    for _ in range(entries):
        length, name_offset, vector, data_type, _f, _u, _v, data_offset = struct.unpack_from(
            f"{order}iiibbbbi", data, offset
        )
        if vector == 0 and data_type == ord("J"):
            name_end = data.index(b"\0", offset + name_offset)
            name = data[offset + name_offset : name_end].decode()
            counters[name] = struct.unpack_from(f"{order}q", data, offset + data_offset)[0]
        offset += length
    return counters


@dataclass
class ChildRun:
    """What a benchmark child printed as its result, its wall time and its memory peaks."""

    result: dict
    wall_s: float
    peaks: Peaks
    log: str = ""


def run_child(args: list[str], log_path: Path, timeout: float, env: dict | None = None) -> ChildRun:
    """Run ``python args...`` from the repo root; return its ``BENCH_RESULT`` line parsed."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    child_env = {**os.environ, "MEDALLION_SPARK_MASTER": "local[2]", **(env or {})}
    started = time.monotonic()
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [PYTHON, *args],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=child_env,
            start_new_session=True,
        )
        with TreeSampler(process.pid) as sampler:
            try:
                stdout, _ = process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                kill_tree(process)
                stdout, _ = process.communicate()
        log.write(stdout)
    wall = time.monotonic() - started
    lines = [line for line in stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if process.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(args)} failed (exit {process.returncode}); see {log_path}")
    return ChildRun(json.loads(lines[-1][len(RESULT_PREFIX) :]), wall, sampler.peaks)


def kill_tree(process: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """Signal a child started with ``start_new_session=True`` and everything it started."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)


# --- when did landed files become visible? -------------------------------------------------


@dataclass
class Commit:
    version: int
    timestamp_s: float
    added: list[str] = field(default_factory=list)  # data files (dataChange=true)
    txn_version: int | None = None


def read_commits(table: str) -> list[Commit]:
    """The commits of a Delta table from its JSON log, oldest first."""
    log = Path(table) / "_delta_log"
    commits = []
    for path in sorted(log.glob("*.json")):
        commit = Commit(int(path.stem), 0.0)
        actions = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        for action in actions:
            if "commitInfo" in action:
                commit.timestamp_s = action["commitInfo"]["timestamp"] / 1000
            elif "add" in action and action["add"].get("dataChange", True):
                commit.added.append(action["add"]["path"])
        # The batch that wrote it: medallion's tag in userMetadata, or a Delta txn action.
        commit.txn_version = next(iter(commit_tags(actions).values()), None)
        commits.append(commit)
    return commits


def first_version_of_files(table: str, commits: list[Commit]) -> dict[str, tuple[int, float]]:
    """Landed file name -> (version, commit time) of the first commit that holds its rows."""
    seen: dict[str, tuple[int, float]] = {}
    for commit in commits:
        for added in commit.added:
            for name in _source_files(str(Path(table) / added)):
                if name not in seen:
                    seen[name] = (commit.version, commit.timestamp_s)
    return seen


@functools.lru_cache(maxsize=100_000)
def _source_files(data_file: str) -> frozenset[str]:
    """The landed file names whose rows a Delta data file holds (data files never change)."""
    names = pq.read_table(data_file, columns=["_source_file"]).column(0).to_pylist()
    return frozenset(os.path.basename(source or "") for source in names)


def visible_times(lake: str, landed: dict[str, float]) -> dict[str, dict[str, float]]:
    """For each landed file (name -> landing time), when its rows were queryable in bronze,
    silver and gold (hourly metrics), in seconds since its landing; files not yet visible are
    left out.

    bronze_events carries each batch through every layer, and every write of batch b carries
    txnVersion b: a file is in gold with the gold commit of the batch that took it into bronze.
    """
    bronze_table = f"{lake}/bronze/events"
    bronze_commits = read_commits(bronze_table)
    bronze = first_version_of_files(bronze_table, bronze_commits)
    batch_of = {c.version: c.txn_version for c in bronze_commits}
    silver_table = f"{lake}/silver/events"
    silver = first_version_of_files(silver_table, read_commits(silver_table))
    gold_at: dict[int, float] = {}
    for commit in read_commits(f"{lake}/gold/hourly_product_metrics"):
        if commit.txn_version is not None:
            gold_at.setdefault(commit.txn_version, commit.timestamp_s)
    out: dict[str, dict[str, float]] = {"bronze": {}, "silver": {}, "gold": {}}
    for name, landed_at in landed.items():
        if name not in bronze:
            continue
        version, at = bronze[name]
        out["bronze"][name] = at - landed_at
        if name in silver:
            out["silver"][name] = silver[name][1] - landed_at
        batch = batch_of.get(version)
        if batch is not None and batch in gold_at:
            out["gold"][name] = gold_at[batch] - landed_at
    return out


def tutorial_visible_times(workdir: str, landed: dict[str, float]) -> dict[str, dict[str, float]]:
    """:func:`visible_times` for the tutorial peer's streams (peers/tutorial.py; a layer it did
    not stream has no times): bronze and silver as for medallion; a file is in gold with the
    first commit of a gold batch that read the silver version holding it (the Delta source
    offset in gold's checkpoint)."""
    tables = {layer: f"{workdir}/{layer}/events" for layer in ("bronze", "silver", "gold")}
    streamed = {layer: Path(t, "_delta_log").is_dir() for layer, t in tables.items()}
    commits = {layer: read_commits(t) if streamed[layer] else [] for layer, t in tables.items()}
    bronze = first_version_of_files(tables["bronze"], commits["bronze"])
    silver = first_version_of_files(tables["silver"], commits["silver"])
    gold_at: dict[int, float] = {}  # batch -> its commit
    for commit in commits["gold"]:
        if commit.txn_version is not None:
            gold_at.setdefault(commit.txn_version, commit.timestamp_s)
    read_up_to = []  # (commit time, silver versions that batch had read: < this bound)
    for batch, at in sorted(gold_at.items()):
        offsets = Path(workdir, "_checkpoints", "gold", "offsets", str(batch))
        offset = json.loads(offsets.read_text().splitlines()[2])
        whole = offset["reservoirVersion"] + (1 if offset.get("index", -1) != -1 else 0)
        read_up_to.append((at, whole))
    out: dict[str, dict[str, float]] = {"bronze": {}, "silver": {}, "gold": {}}
    for name, landed_at in landed.items():
        if name in bronze:
            out["bronze"][name] = bronze[name][1] - landed_at
        if name not in silver:
            continue
        version, at = silver[name]
        out["silver"][name] = at - landed_at
        in_gold = [commit for commit, bound in read_up_to if version < bound]
        if in_gold:
            out["gold"][name] = min(in_gold) - landed_at
    return out


def gold_batches(lake: str) -> int:
    """How many batches added to gold (its commits tagged with a batch id)."""
    commits = read_commits(f"{lake}/gold/hourly_product_metrics")
    return len({c.txn_version for c in commits if c.txn_version is not None})


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100), nearest-rank; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]
