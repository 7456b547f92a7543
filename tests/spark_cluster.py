"""A Spark standalone cluster on 127.0.0.1: one master and N workers from pyspark's own jars.

pip's pyspark ships ``bin/spark-class`` but not ``sbin/start-master.sh``/``start-worker.sh``,
so each daemon is started the way those scripts would start it, in the foreground, in its own
process group (a worker's executors are its children and share that group): stopping the
cluster kills every group, so no JVM outlives it. ``SPARK_LOCAL_IP=127.0.0.1`` makes every
daemon, executor and driver (and the master's and workers' web UIs) bind to the loopback
interface only; :func:`listening_sockets` checks that from ``/proc``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).resolve().parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
LOOPBACK = "127.0.0.1"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def loopback_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with every Spark bind on 127.0.0.1."""
    env = dict(os.environ if base is None else base)
    env["SPARK_LOCAL_IP"] = LOOPBACK
    env.pop("SPARK_LOCAL_HOSTNAME", None)
    env.pop("SPARK_REMOTE", None)
    return env


class SparkStandaloneCluster:
    """A master and ``workers`` workers of ``cores`` cores and ``memory`` each, under ``workdir``."""

    def __init__(self, workdir: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.workdir = workdir
        self.workers, self.cores, self.memory = workers, cores, memory
        self.port = self.webui_port = 0
        self.processes: dict[str, subprocess.Popen] = {}

    @property
    def master_url(self) -> str:
        return f"spark://{LOOPBACK}:{self.port}"

    @property
    def webui_url(self) -> str:
        return f"http://{LOOPBACK}:{self.webui_port}"

    def worker_dir(self, index: int) -> Path:
        return self.workdir / f"worker-{index}"

    def log_path(self, name: str) -> Path:
        return self.workdir / "logs" / f"{name}.log"

    def _env(self) -> dict[str, str]:
        env = loopback_env()
        env.update(
            SPARK_HOME=str(SPARK_HOME),
            # An empty conf folder: no spark-defaults.conf or log4j2.properties of the machine's
            # (the executors log at Spark's default INFO, which the test reads).
            SPARK_CONF_DIR=str(self.workdir / "conf"),
            SPARK_LOG_DIR=str(self.workdir / "logs"),
            SPARK_WORKER_DIR=str(self.workdir / "work"),
            # Executors' scratch space (shuffle, spills, fetched jars) stays under workdir too.
            SPARK_LOCAL_DIRS=str(self.workdir / "local"),
            SPARK_PID_DIR=str(self.workdir / "pids"),
            # The daemons only schedule: their own heap stays small (executors get --memory).
            SPARK_DAEMON_MEMORY="256m",
            SPARK_DAEMON_JAVA_OPTS=os.environ.get("MEDALLION_JAVA_OPTIONS", ""),
            # No REST submission server: it would listen on the fixed port 6066.
            SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
        )
        return env

    def _spark_class(self, name: str, main: str, *args: str) -> None:
        with open(self.log_path(name), "wb") as log:  # the daemon keeps its own copy
            self.processes[name] = subprocess.Popen(
                [str(SPARK_CLASS), main, *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self._env(),
                cwd=self.workdir,
                start_new_session=True,
            )

    def start(self, timeout: float = 180.0) -> SparkStandaloneCluster:
        """Start the master, then the workers; return once every worker is ALIVE."""
        for folder in ("logs", "conf"):
            (self.workdir / folder).mkdir(parents=True, exist_ok=True)
        self.port, self.webui_port = free_port(), free_port()
        try:
            self._spark_class(
                "master",
                "org.apache.spark.deploy.master.Master",
                *("--host", LOOPBACK, "--port", str(self.port)),
                *("--webui-port", str(self.webui_port)),
            )
            for index in range(1, self.workers + 1):
                self.worker_dir(index).mkdir(parents=True, exist_ok=True)
                self._spark_class(
                    f"worker-{index}",
                    "org.apache.spark.deploy.worker.Worker",
                    *("--host", LOOPBACK, "--cores", str(self.cores), "--memory", self.memory),
                    *("--webui-port", str(free_port())),
                    *("--work-dir", str(self.worker_dir(index))),
                    self.master_url,
                )
            self._wait_for_workers(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_for_workers(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"spark {name} exited {process.returncode}:\n{self.tail()}")
            with contextlib.suppress(OSError, ValueError):
                if self.status().get("aliveworkers") == self.workers:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{self.workers} workers not alive in {timeout} s:\n{self.tail()}"
                )
            time.sleep(0.5)

    def status(self) -> dict:
        """The master's web UI JSON: workers, aliveworkers, activeapps, completedapps, ..."""
        with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=5) as response:
            return json.load(response)

    def pgids(self) -> set[int]:
        """The process groups of the daemons (a worker's executors are in its group)."""
        return {process.pid for process in self.processes.values()}

    def executor_logs(self, index: int) -> list[Path]:
        """The stderr files of the executors that worker ``index`` launched."""
        return sorted(self.worker_dir(index).glob("app-*/*/stderr"))

    def tail(self, chars: int = 2000) -> str:
        parts = []
        for name in self.processes:
            text = self.log_path(name).read_text(errors="replace")
            parts.append(f"--- {name}\n{text[-chars:]}")
        return "\n".join(parts)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM every process group, then SIGKILL what is left; no JVM survives."""
        for process in self.processes.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for process in self.processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            # The group too: an executor may outlive its worker by a moment.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def __enter__(self) -> SparkStandaloneCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _address(hex_address: str) -> str:
    raw = bytes.fromhex(hex_address)
    # /proc/net/tcp{,6} print each 32-bit word in host (little-endian) order.
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    family = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
    return socket.inet_ntop(family, words)


def is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


def listening_sockets(pgids: set[int]) -> set[tuple[int, int, str, int]]:
    """(pgid, pid, address, port) of every TCP socket listening in a process of ``pgids``."""
    listening: dict[str, tuple[str, int]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                if fields[3] == "0A":  # TCP_LISTEN
                    address, port = fields[1].split(":")
                    listening[fields[9]] = (_address(address), int(port, 16))
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            pgid = os.getpgid(pid)
            if pgid not in pgids:
                continue
            for fd in (entry / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:[") and target[8:-1] in listening:
                    found.add((pgid, pid, *listening[target[8:-1]]))
        except OSError:  # the process or the descriptor went away meanwhile
            continue
    return found
