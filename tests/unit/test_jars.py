"""The jar cache: resolved once, loaded from a folder whose manifest lists each jar's hash."""

from __future__ import annotations

import json

import pytest

from medallion.jars import MANIFEST, cache_folder, cached_jars, store_jars
from medallion.session import local_conf

DELTA = ["io.delta:delta-spark_4.2_2.13:4.4.0"]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MEDALLION_JAR_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _resolved(tmp_path, *names: str) -> list[str]:
    ivy = tmp_path / "ivy"
    ivy.mkdir(exist_ok=True)
    for name in names:
        (ivy / name).write_bytes(name.encode() * 100)
    return [(ivy / name).as_uri() for name in names]  # Spark lists them as file: URIs


def test_stored_jars_are_found_again_and_a_changed_one_makes_them_resolve_again(tmp_path, cache):
    assert cached_jars(DELTA) is None
    resolved = _resolved(tmp_path, "delta-spark.jar", "delta-storage.jar")

    stored = store_jars(DELTA, [], resolved)

    folder = cache_folder(DELTA)
    assert folder.parent == cache and folder.name.startswith("delta-spark_4.2_2.13-")
    assert stored == [str(folder / "delta-spark.jar"), str(folder / "delta-storage.jar")]
    assert cached_jars(DELTA) == stored
    manifest = json.loads((folder / MANIFEST).read_text())
    assert [entry["file"] for entry in manifest["jars"]] == ["delta-spark.jar", "delta-storage.jar"]
    # Another set of packages, or another repository, has a folder of its own.
    assert cached_jars([*DELTA, "org.example:other:1.0"]) is None
    assert cached_jars(DELTA, ["file:///elsewhere"]) is None
    # A jar changed after it was stored: not used, so the next session resolves again.
    (folder / "delta-storage.jar").write_bytes(b"truncated")
    assert cached_jars(DELTA) is None
    # Storing again replaces the stale folder.
    assert store_jars(DELTA, [], resolved) == stored
    assert cached_jars(DELTA) == stored


def test_a_folder_without_its_manifest_is_never_used(tmp_path, cache):
    folder = cache_folder(DELTA)
    folder.mkdir(parents=True)
    (folder / "delta-spark.jar").write_bytes(b"half a download")
    assert cached_jars(DELTA) is None


def test_a_session_loads_cached_jars_and_resolves_only_what_is_not_cached(tmp_path, cache):
    resolving = local_conf(packages=())
    assert resolving["spark.jars.packages"].startswith("io.delta:delta-spark")
    assert "spark.jars" not in resolving
    packages = resolving["spark.jars.packages"].split(",")
    repositories = [r for r in resolving.get("spark.jars.repositories", "").split(",") if r]
    store_jars(packages, repositories, _resolved(tmp_path, "delta-spark.jar"))

    cached = local_conf(packages=())
    assert "spark.jars.packages" not in cached
    assert cached["spark.jars"] == str(cache_folder(packages, repositories) / "delta-spark.jar")
    # The JVM's logging configuration applies from its start.
    assert "-Dlog4j2.configurationFile=file:" in cached["spark.driver.extraJavaOptions"]
