"""What `databricks bundle deploy` uploads, computed as the Databricks CLI computes it: the
files git does not ignore (tracked, or untracked and not ignored), plus those `sync.include`
names, less those `sync.exclude` names (gitignore-style patterns; exclude wins). The
workspace refuses to import a file over 10 MiB, so one such file fails the whole deploy."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pathspec
from bundle_support import ROOT

from medallion.bundle.resolve import Bundle

# The workspace's import limit: 10 MiB.
IMPORT_LIMIT_BYTES = 10 * 1024 * 1024
# What the jobs read from the workspace: the package's source (each pipeline's job and dashboard
# files beside it), the notebooks, the bundle's shared files, and README.md, which
# pyproject.toml names.
NEEDED = {"src", "notebooks", "resources", "databricks.yml", "pyproject.toml"}
ALSO_SYNCED = {"README.md", ".gitignore"}


def _git_files(root: Path, *options: str) -> set[str]:
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", *options],
        capture_output=True,
        check=True,
    ).stdout.decode()
    return {name for name in listed.split("\0") if name}


def synced_files(root: Path) -> set[str]:
    """The bundle-relative paths a deploy of the bundle at ``root`` uploads."""
    sync = Bundle(root).config.get("sync") or {}
    files = _git_files(root) | _git_files(root, "--others", "--exclude-standard")
    files = {name for name in files if (root / name).is_file()}
    if sync.get("include"):
        include = pathspec.GitIgnoreSpec.from_lines(sync["include"])
        every = (p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
        files |= {
            name for name in every if not name.startswith(".git/") and include.match_file(name)
        }
    exclude = pathspec.GitIgnoreSpec.from_lines(sync.get("exclude") or [])
    return {name for name in files if not exclude.match_file(name)}


def oversized(root: Path, names: set[str]) -> dict[str, int]:
    """The files among ``names`` that the workspace would refuse, with their sizes."""
    sizes = {name: (root / name).stat().st_size for name in names}
    return {name: size for name, size in sizes.items() if size > IMPORT_LIMIT_BYTES}


def test_a_deploy_uploads_what_the_jobs_need_and_no_file_over_the_import_limit():
    synced = synced_files(ROOT)
    assert oversized(ROOT, synced) == {}
    top = {name.split("/", 1)[0] for name in synced}
    assert top >= NEEDED, NEEDED - top
    assert top <= NEEDED | ALSO_SYNCED, top - NEEDED - ALSO_SYNCED
    assert "src/medallion/__init__.py" in synced
    assert not [name for name in synced if name.startswith(("tests/", "benchmarks/", "docs/"))]


def test_a_file_over_the_limit_in_a_synced_folder_is_found_and_one_left_out_is_not(tmp_path):
    shutil.copy(ROOT / "databricks.yml", tmp_path / "databricks.yml")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for folder in ("src", "tests"):
        (tmp_path / folder).mkdir()
        with open(tmp_path / folder / "large.json", "wb") as large:
            large.truncate(IMPORT_LIMIT_BYTES + 1)  # sparse: no 10 MiB written
    (tmp_path / "src" / "small.py").write_text("x = 1\n")
    synced = synced_files(tmp_path)
    assert synced == {"databricks.yml", "src/large.json", "src/small.py"}
    assert oversized(tmp_path, synced) == {"src/large.json": IMPORT_LIMIT_BYTES + 1}
