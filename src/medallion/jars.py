"""The jars a local Spark session loads, resolved from Maven Central once and kept in a cache.

Resolving ``spark.jars.packages`` with Ivy on every start costs seconds and prints about 80
lines. Instead, the first session with a set of packages resolves them as usual, then copies
the jars Ivy resolved into ``<cache>/<name>-<key>/`` with a manifest of their SHA-256 hashes,
written last as the completion marker. Later sessions load those files with ``spark.jars``
and resolve nothing. The key covers the packages, their repositories and the Spark version,
so a new pin gets a new folder. A jar whose hash no longer matches makes the folder stale:
it is resolved again.

The cache is ``$MEDALLION_JAR_CACHE``, else ``$XDG_CACHE_HOME/medallion/jars``
(``~/.cache/medallion/jars``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

log = logging.getLogger(__name__)

CACHE_VARIABLE = "MEDALLION_JAR_CACHE"
MANIFEST = "manifest.json"


def cache_root() -> Path:
    """Where resolved jars are kept: ``$MEDALLION_JAR_CACHE``, else the user's cache folder."""
    if os.environ.get(CACHE_VARIABLE):
        return Path(os.environ[CACHE_VARIABLE]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "medallion" / "jars"


def cache_folder(packages: Sequence[str], repositories: Sequence[str] = ()) -> Path:
    """The folder of one set of packages: named after the first, keyed by all of them, their
    repositories and the Spark version."""
    # deferred: loads pyspark
    from pyspark import __version__ as spark_version

    identity = {"packages": list(packages), "repositories": list(repositories)}
    identity["spark"] = spark_version  # type: ignore[assignment]
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", packages[0].split(":")[1]) if packages else "none"
    return cache_root() / f"{name}-{key}"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def cached_jars(packages: Sequence[str], repositories: Sequence[str] = ()) -> list[str] | None:
    """The cached jars of ``packages``, as paths for ``spark.jars``; None when they are not
    cached yet, or when a jar is missing or its hash changed."""
    folder = cache_folder(packages, repositories)
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    jars = []
    for entry in manifest.get("jars", []):
        path = folder / entry["file"]
        if not path.is_file() or _sha256(path) != entry["sha256"]:
            log.warning("the cached jar %s is missing or changed: resolving the jars again", path)
            return None
        jars.append(str(path))
    return jars or None


def store_jars(
    packages: Sequence[str], repositories: Sequence[str], resolved: Sequence[str]
) -> list[str]:
    """Copy the jars Ivy ``resolved`` (paths or ``file:`` URIs) into the cache folder of
    ``packages``; the manifest goes last, so a folder without one is never used. Returns the
    cached paths. Another process that stored the same set first wins."""
    folder = cache_folder(packages, repositories)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        entries = []
        for source in map(_local_path, resolved):
            shutil.copy2(source, staging / source.name)
            entries.append({"file": source.name, "sha256": _sha256(staging / source.name)})
        manifest = {"packages": list(packages), "repositories": list(repositories)}
        manifest["jars"] = entries  # type: ignore[assignment]
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        try:
            staging.rename(folder)
        except OSError:  # stored meanwhile by another process, or a stale folder
            if cached_jars(packages, repositories) is None:
                shutil.rmtree(folder, ignore_errors=True)
                staging.rename(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return cached_jars(packages, repositories) or []


def _local_path(jar: str) -> Path:
    parsed = urlparse(jar)
    return Path(unquote(parsed.path) if parsed.scheme == "file" else jar)


def total_megabytes(jars: Sequence[str]) -> float:
    """The size of ``jars`` in MB (10^6 bytes)."""
    return sum(Path(j).stat().st_size for j in jars) / 1e6
