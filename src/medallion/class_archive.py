"""A class-data archive of the local JVM (Java's AppCDS): Spark's classes parsed and verified
once, then mapped by every later local session.

A cold local session loads about 30,000 classes; parsing and verifying them costs seconds of
every short run (``medallion run`` on a laptop, each test that starts a process). With an
archive, those on Spark's class path come from one memory-mapped file instead.

The archive is made by one training run in a process of its own (:func:`build`): a small run
of every pipeline with ``-XX:ArchiveClassesAtExit``, after which its JVM is shut down and
writes the classes it loaded. Local sessions then start with ``-XX:SharedArchiveFile``
(:func:`jvm_options`) while an archive exists for their Java and Spark class path; the key
covers both, so a new JDK or a new pyspark gets a new archive. A JVM that cannot use an archive
starts without it (``-Xshare:auto``, the default). Jars loaded with ``spark.jars`` (Delta's,
Kafka's) are not on the class path and stay out of it.

The archives are kept in ``$MEDALLION_CLASS_ARCHIVES``, else next to the jar cache
(``~/.cache/medallion/classes``). ``MEDALLION_CLASS_ARCHIVES=off`` turns them off. Build one
for this machine with ``python -m medallion.class_archive``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from medallion.config import Config
from medallion.local_fs import file_system_jar
from medallion.pipelines import generate_input
from medallion.session import get_spark

log = logging.getLogger(__name__)

FOLDER_VARIABLE = "MEDALLION_CLASS_ARCHIVES"
# Set in the training process: the file its JVM writes the archive to when it exits.
_DUMP_VARIABLE = "MEDALLION_CLASS_ARCHIVE_DUMP"


def folder() -> Path | None:
    """Where archives are kept; None when ``MEDALLION_CLASS_ARCHIVES=off``."""
    configured = os.environ.get(FOLDER_VARIABLE, "")
    if configured.lower() == "off":
        return None
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "medallion" / "classes"


def _java() -> Path | None:
    """The java that pyspark's launcher runs: ``$JAVA_HOME/bin/java``, else the PATH's."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def _identity(path: Path) -> list:
    status = path.stat()
    return [str(path), status.st_size, status.st_mtime_ns]


def archive_path() -> Path | None:
    """The archive for this machine's Java and Spark class path (existing or not); None when
    archives are off or there is no Java."""
    # deferred: loads pyspark
    import pyspark

    where, java = folder(), _java()
    if where is None or java is None:
        return None

    jars = sorted(Path(pyspark.__file__).parent.joinpath("jars").glob("*.jar"))
    # A local session's class path starts with medallion's file system, when there is one.
    jars = [jar for jar in [file_system_jar()] if jar is not None] + jars
    identity = {"java": _identity(java), "jars": [_identity(jar) for jar in jars]}
    key = hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:16]
    return where / f"spark-{pyspark.__version__}-{key}.jsa"


def jvm_options() -> str:
    """The option that maps the archive (``-XX:SharedArchiveFile=...``) when one exists; the
    option that writes one at exit in a training run; else nothing."""
    dump = os.environ.get(_DUMP_VARIABLE)
    if dump:
        return f"-XX:ArchiveClassesAtExit={dump}"
    path = archive_path()
    return f"-XX:SharedArchiveFile={path}" if path is not None and path.is_file() else ""


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
    env = {**os.environ, _DUMP_VARIABLE: str(dump), "MEDALLION_JAVA_OPTIONS": options}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "medallion.class_archive", "--train"],
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
    """``python -m medallion.class_archive``: make this machine's archive (``--train`` is the
    training run itself)."""
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
