"""Run the real ``medallion`` CLI in its own process group, and kill it like a crash would."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

MEDALLION = str(Path(sys.executable).with_name("medallion"))

# The long-lived JVMs of the suite, the shared session and the notebook kernel, run with a local
# session's own options (medallion.jvm_options.LOCAL_JVM_OPTIONS): C1, then C2 only after ten times
# the default count of calls and loops, since the suite runs many different plans a few times
# each (docs/testing.md). The processes the suite starts, each a run or two, compile with C1
# alone, where C2's compilations cost more CPU than they save; C1's default code cache (48 MB)
# fills within a minute of Spark, hence the larger one. MEDALLION_JAVA_OPTIONS, when set,
# applies to every JVM instead.
SHORT_LIVED_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m"
LONG_LIVED_JVM_OPTIONS = os.environ.get("MEDALLION_JAVA_OPTIONS", "")


def short_lived_jvms_by_default() -> None:
    """Make :data:`SHORT_LIVED_JVM_OPTIONS` the options of the JVMs this process starts,
    unless ``MEDALLION_JAVA_OPTIONS`` was given."""
    os.environ.setdefault("MEDALLION_JAVA_OPTIONS", SHORT_LIVED_JVM_OPTIONS)


def long_lived_jvm_env() -> dict[str, str]:
    """The environment for a JVM that serves many runs: the shared session, a notebook kernel."""
    return {**os.environ, "MEDALLION_JAVA_OPTIONS": LONG_LIVED_JVM_OPTIONS}


def start_medallion(
    *args: str, log_path: Path, env: dict[str, str] | None = None
) -> subprocess.Popen:
    """Start ``medallion ARGS`` in a new session (its own process group), logging to a file;
    ``env`` adds environment variables."""
    log = open(log_path, "ab")  # noqa: SIM115 - the process owns it until it exits
    return subprocess.Popen(
        [MEDALLION, *args],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, **(env or {})},
    )


def run_medallion(
    *args: str, timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run ``medallion ARGS`` to completion and capture its output; ``env`` adds variables."""
    return subprocess.run(
        [MEDALLION, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL the whole process group (the Python driver and its JVM), as a power cut would."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=60)


def batch_in_flight(checkpoint: Path) -> bool:
    """True when the stream has planned a batch (offsets written) that it has not committed."""
    offsets, commits = checkpoint / "offsets", checkpoint / "commits"
    if not offsets.is_dir():
        return False
    planned = {p.name for p in offsets.iterdir() if p.name.isdigit()}
    done = {p.name for p in commits.iterdir() if p.name.isdigit()} if commits.is_dir() else set()
    return bool(planned - done)


def committed_batches(checkpoint: Path) -> int:
    """How many batches the stream has committed."""
    commits = checkpoint / "commits"
    return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.is_dir() else 0


def wait_until(predicate, timeout: float, interval: float = 0.05) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False
