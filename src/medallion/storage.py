"""The few file-system operations the engine needs on paths it does not read through Spark:
local folders (and Unity Catalog volumes through their FUSE mount) directly, anything else
(``s3://``, ``abfss://``, ``dbfs:``) through Hadoop's file system in the session's JVM."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from urllib.parse import unquote, urlparse

from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def local_path(path: str) -> str | None:
    """``path`` as a local (or FUSE-mounted) path: ``file:`` URIs unwrapped, None for other URIs."""
    parsed = urlparse(path)
    if parsed.scheme == "file":
        return os.path.normpath(unquote(parsed.path))
    if "://" in path or parsed.scheme == "dbfs":
        return None
    return path


def _hadoop_fs(spark: SparkSession, path: str):
    """Hadoop's file system for ``path`` and its ``Path`` (classic sessions only)."""
    jvm = spark.sparkContext._jvm  # type: ignore[union-attr]
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    return hadoop_path.getFileSystem(conf), hadoop_path


def folder_exists(spark: SparkSession, path: str) -> bool:
    """True when ``path`` is a folder (locally, or through Hadoop's file system)."""
    local = local_path(path)
    if local is not None:
        return os.path.isdir(local)
    fs, hadoop_path = _hadoop_fs(spark, path)
    return bool(fs.exists(hadoop_path)) and bool(fs.getFileStatus(hadoop_path).isDirectory())


def list_names(spark: SparkSession, folder: str) -> list[str] | None:
    """The names in ``folder`` ([] when it does not exist); None when it cannot be listed from
    here (a remote path over Spark Connect, which has no local JVM)."""
    local = local_path(folder)
    if local is not None:
        try:
            return os.listdir(local)
        except (FileNotFoundError, NotADirectoryError):
            return []
    try:
        fs, hadoop_path = _hadoop_fs(spark, folder)
        if not fs.exists(hadoop_path):
            return []
        return [status.getPath().getName() for status in fs.listStatus(hadoop_path)]
    except Exception:  # noqa: BLE001 - Spark Connect: no JVM to list with
        log.debug("could not list %s", folder, exc_info=True)
        return None


def read_text(spark: SparkSession, path: str) -> str:
    """A small file's text: directly, through Hadoop's file system, or (Spark Connect) Spark.

    Not ``spark.read.text`` first: it globs the path, and a ``\\`` or ``[`` in a folder name
    would be taken for a pattern.
    """
    local = local_path(path)
    if local is not None:
        with open(local, encoding="utf-8") as handle:
            return handle.read()
    try:
        fs, hadoop_path = _hadoop_fs(spark, path)
    except Exception:  # noqa: BLE001 - Spark Connect: no JVM, read through Spark
        return "\n".join(row.value for row in spark.read.text(path).collect())
    stream = fs.open(hadoop_path)
    try:
        jvm = spark.sparkContext._jvm  # type: ignore[union-attr]
        return jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
    finally:
        stream.close()


def write_text(spark: SparkSession, path: str, text: str) -> None:
    """Write a small file (its folder is created), replacing any file of that name."""
    local = local_path(path)
    if local is not None:
        os.makedirs(os.path.dirname(local), exist_ok=True)
        temporary = f"{local}.tmp"
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, local)
        return
    fs, hadoop_path = _hadoop_fs(spark, path)
    stream = fs.create(hadoop_path, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()


def delete_file(spark: SparkSession, path: str) -> None:
    """Delete one file (nothing happens when it does not exist)."""
    local = local_path(path)
    if local is not None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(local)
        return
    fs, hadoop_path = _hadoop_fs(spark, path)
    fs.delete(hadoop_path, False)


def delete_folder(spark: SparkSession, path: str) -> None:
    """Delete a folder and everything in it (nothing happens when it does not exist)."""
    local = local_path(path)
    if local is not None:
        if os.path.exists(local):
            shutil.rmtree(local)
        return
    fs, hadoop_path = _hadoop_fs(spark, path)
    fs.delete(hadoop_path, True)
