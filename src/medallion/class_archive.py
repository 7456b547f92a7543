"""A class-data archive of the local JVM (Java's AppCDS): Spark's classes parsed and verified
once, then mapped by every later local session.

A cold local session loads about 30,000 classes; parsing and verifying them costs seconds of
every short run (``medallion run`` on a laptop, each test that starts a process). With an
archive, those on Spark's class path come from one memory-mapped file instead.

The archive is made by one training run in a process of its own
(``medallion.class_archive_training.build``): a small run of every pipeline with
``-XX:ArchiveClassesAtExit``, after which its JVM is shut down and writes the classes it
loaded. Local sessions then start with ``-XX:SharedArchiveFile`` (:func:`jvm_options`) while
an archive exists for their Java and Spark class path; the key covers both, so a new JDK or a
new pyspark gets a new archive. A JVM that cannot use an archive starts without it
(``-Xshare:auto``, the default). Jars loaded with ``spark.jars`` (Delta's, Kafka's) are not on
the class path and stay out of it.

The archives are kept in ``$MEDALLION_CLASS_ARCHIVES``, else next to the jar cache
(``~/.cache/medallion/classes``). ``MEDALLION_CLASS_ARCHIVES=off`` turns them off. Build one
for this machine with ``python -m medallion.class_archive_training``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from medallion.local_fs import file_system_jar

FOLDER_VARIABLE = "MEDALLION_CLASS_ARCHIVES"
# Set in the training process: the file its JVM writes the archive to when it exits.
DUMP_VARIABLE = "MEDALLION_CLASS_ARCHIVE_DUMP"


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
    dump = os.environ.get(DUMP_VARIABLE)
    if dump:
        return f"-XX:ArchiveClassesAtExit={dump}"
    path = archive_path()
    return f"-XX:SharedArchiveFile={path}" if path is not None and path.is_file() else ""
