"""The training run that makes the class-data archive of medallion/class_archive.py.

``python -m medallion.class_archive_training`` makes this machine's archive (about two minutes,
once per JDK and pyspark); ``make test`` makes it when there is none.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from medallion.class_archive import DUMP_VARIABLE, archive_path
from medallion.config import Config
from medallion.pipelines import generate_input
from medallion.session import get_spark

log = logging.getLogger(__name__)


def build(timeout: float = 900) -> Path | None:
    """Make the archive for this machine in a training run of its own, unless it exists.

    Returns its path, or None when archives are off, there is no Java, or the run failed (a
    warning says why; sessions then simply start without one)."""
    target = archive_path()
    if target is None or target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    dump = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    # C1 alone: the training run is short, and what it archives does not depend on the JIT.
    options = f"{os.environ.get('MEDALLION_JAVA_OPTIONS', '')} -XX:TieredStopAtLevel=1".strip()
    env = {**os.environ, DUMP_VARIABLE: str(dump), "MEDALLION_JAVA_OPTIONS": options}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "medallion.class_archive_training", "--train"],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    try:
        if done.returncode != 0 or not dump.is_file():
            log.warning("no class archive: its training run failed: %s", done.stderr[-2000:])
            return None
        dump.replace(target)
    finally:
        dump.unlink(missing_ok=True)
    log.info(
        "class archive %s made in %.0f s (%s)",
        target,
        time.monotonic() - started,
        done.stderr.strip(),
    )
    return target


def _train() -> None:
    """The training run: every pipeline on a little generated input, then the JVM shuts down
    (closing its stdin ends pyspark's gateway) and writes the archive before it exits."""
    # deferred: loads pyspark, rich
    from pyspark import SparkContext

    from medallion.streams.runner import run_available_now

    started = time.monotonic()
    spark = get_spark(app_name="medallion-class-archive", master="local[2]")
    with tempfile.TemporaryDirectory(prefix="medallion-class-archive-") as work:
        landing, lake = f"{work}/landing", f"{work}/lake"
        # Retail's flows use the most of Spark and Delta: MERGE, the change data feed, a
        # stream-static join.
        generate_input(landing, ["retail"], records=100, files=1, seed=1)
        run_available_now(spark, Config(landing=landing, lake=lake))
    ran = time.monotonic()
    gateway = SparkContext._gateway
    spark.stop()
    process = gateway.proc  # type: ignore[union-attr]
    gateway.shutdown()  # type: ignore[union-attr]
    process.stdin.close()
    if process.wait(timeout=600) != 0:
        raise SystemExit(f"the JVM exited with {process.returncode}")
    print(f"ran {ran - started:.0f} s, archived {time.monotonic() - ran:.0f} s", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """``python -m medallion.class_archive_training``: make this machine's archive
    (``--train`` is the training run itself)."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["--train"]:
        _train()
        return 0
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    path = build()
    if path is None:
        print("no class archive (off, no Java, or the training run failed)", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
