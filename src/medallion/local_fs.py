"""A local session's file system: Hadoop's, but without a process per file it creates.

Without Hadoop's native library (pyspark ships none), Hadoop's ``RawLocalFileSystem`` sets the
permissions of every file and folder it creates by running ``chmod``: a data file and its
checksum file are two processes, about 180 in a small retail run, 16 ms a file on 2 cores.
``medallion.fs.NioLocalFileSystem`` (java/NioLocalFileSystem.java) is the same file system
with ``setPermission`` done in the JVM (``java.nio``). It is compiled once per machine with the
JDK's ``javac`` into ``~/.cache/medallion/local-fs`` (a fixed place: the class-data archive,
medallion/class_archive.py, names the jar by its path), and local sessions put it on the
driver's class path as the ``file:`` file system. Without a ``javac``, or off POSIX, they keep
Hadoop's own; nothing else changes (docs/development.md, "Processes a local run starts").
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import zipfile
from functools import cache
from pathlib import Path

log = logging.getLogger(__name__)

SOURCE = Path(__file__).resolve().parent / "java" / "NioLocalFileSystem.java"
FILE_SYSTEM_CLASS = "medallion.fs.NioLocalFileSystem"


def _hadoop_api_jar() -> Path | None:
    # deferred: loads pyspark
    import pyspark

    jars = sorted(Path(pyspark.__file__).parent.joinpath("jars").glob("hadoop-client-api-*.jar"))
    return jars[-1] if jars else None


def find_javac() -> str | None:
    """The JDK's ``javac`` (``$JAVA_HOME/bin/javac``, else on ``PATH``); None on a JRE alone."""
    home = os.environ.get("JAVA_HOME")
    candidate = Path(home) / "bin" / "javac" if home else None
    if candidate is not None and candidate.is_file():
        return str(candidate)
    return shutil.which("javac")


def _folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "medallion" / "local-fs"


@cache
def file_system_jar() -> Path | None:
    """The jar of :data:`FILE_SYSTEM_CLASS`, compiled now if this machine has none yet; None
    when it cannot be (not POSIX, no ``javac``, or no Hadoop jar in pyspark)."""
    api, javac = _hadoop_api_jar(), find_javac()
    if os.name != "posix" or api is None or javac is None:
        log.debug("local sessions keep Hadoop's file system: not POSIX, no javac or no Hadoop jar")
        return None
    key = hashlib.sha256(SOURCE.read_bytes() + api.name.encode()).hexdigest()[:16]
    target = _folder() / key / "medallion-local-fs.jar"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        classes = Path(work) / "classes"
        command = [javac, "--release", "17", "-nowarn", "-d", str(classes), "-cp", str(api)]
        done = subprocess.run([*command, str(SOURCE)], capture_output=True, text=True)
        if done.returncode != 0:
            log.warning("local sessions keep Hadoop's file system: %s", done.stderr.strip())
            return None
        partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        with zipfile.ZipFile(partial, "w") as jar:
            for path in sorted(classes.rglob("*.class")):
                jar.write(path, path.relative_to(classes).as_posix())
        partial.replace(target)
    return target


def local_file_system_conf() -> dict[str, str]:
    """The settings that make a local session use :data:`FILE_SYSTEM_CLASS` (none without it)."""
    jar = file_system_jar()
    if jar is None:
        return {}
    return {"spark.driver.extraClassPath": str(jar), "spark.hadoop.fs.file.impl": FILE_SYSTEM_CLASS}
