"""``medallion doctor``: what a run needs, checked one by one, each problem with its fix."""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rich.table import Table
from rich.text import Text

from medallion import console
from medallion.bundle.resolve import Bundle, BundleError
from medallion.jars import cache_folder, cached_jars, total_megabytes

MIN_JAVA = 17


@dataclass(frozen=True)
class Check:
    """One check: ``ok`` True (fine), False (a run would fail) or None (optional, absent)."""

    name: str
    ok: bool | None
    detail: str
    fix: str = ""


def java_check() -> Check:
    """Java 17 or newer, from ``JAVA_HOME`` when it is set, else from the PATH."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    where = f"JAVA_HOME={home}" if home else "java on the PATH"
    fix = (
        f"install a JDK {MIN_JAVA} (apt install openjdk-{MIN_JAVA}-jdk-headless) and set JAVA_HOME"
    )
    if not java or not Path(java).exists():
        return Check("java", False, f"not found ({where})", fix)
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except OSError as error:
        return Check("java", False, f"{java} does not run: {error}", fix)
    found = re.search(r'version "(\d+)(?:\.(\d+))?', done.stderr)
    if not found:
        return Check("java", False, f"{java} printed no version", fix)
    major = int(found.group(1)) if found.group(1) != "1" else int(found.group(2) or 0)
    if major < MIN_JAVA:
        return Check("java", False, f"Java {major} ({where}); Spark 4 needs {MIN_JAVA}+", fix)
    return Check("java", True, f"Java {major} ({where})")


def jar_check(packages: list[str]) -> Check:
    """Whether the jars of a local session are cached, or a first run will download them."""
    jars = cached_jars(packages)
    if jars:
        size = total_megabytes(jars)
        return Check("jars", True, f"{len(jars)} jars, {size:.0f} MB in {cache_folder(packages)}")
    return Check(
        "jars",
        None,
        f"not cached yet: the first run downloads them from Maven Central into "
        f"{cache_folder(packages).parent}",
        "nothing to do; needs network access to Maven Central once",
    )


def lake_check(lake: str) -> Check:
    """Write access to the lake folder (or to the folder that would hold it)."""
    target = Path(lake).resolve()
    existing = next((p for p in (target, *target.parents) if p.exists()), None)
    if existing is None or not existing.is_dir():
        return Check("lake", False, f"{target}: no folder to create it in", "give another --lake")
    try:
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".medallion-doctor-"):
            pass
    except OSError as error:
        return Check(
            "lake",
            False,
            f"{target}: cannot write in {existing} ({error.strerror})",
            f"give a writable --lake, or grant write access to {existing}",
        )
    state = "exists" if target.exists() else f"will be created in {existing}"
    return Check("lake", True, f"{target} ({state}, writable)")


def bundle_check() -> Check:
    """The bundle (databricks.yml) that ``medallion job`` would read."""
    try:
        bundle = Bundle()
    except (BundleError, OSError, ValueError) as error:
        return Check(
            "bundle",
            None,
            f"none found ({error})",
            "run from the repository, or set MEDALLION_BUNDLE_ROOT",
        )
    return Check("bundle", True, f"{bundle.main_file} ({len(bundle.jobs_spec)} jobs)")


def databricks_check() -> Check:
    """A Databricks profile or host, which only deployed runs need."""
    if os.environ.get("DATABRICKS_HOST"):
        return Check("databricks", True, f"DATABRICKS_HOST={os.environ['DATABRICKS_HOST']}")
    config = Path(os.environ.get("DATABRICKS_CONFIG_FILE", "~/.databrickscfg")).expanduser()
    if config.is_file():
        parser = configparser.ConfigParser()
        try:
            parser.read(config, encoding="utf-8")
        except configparser.Error as error:
            return Check("databricks", False, f"{config} does not parse: {error}", "fix the file")
        profiles = [*(["DEFAULT"] if parser.defaults() else []), *parser.sections()]
        return Check("databricks", True, f"{config}: profiles {', '.join(profiles) or 'none'}")
    return Check(
        "databricks",
        None,
        "no profile (only deployed runs need one)",
        "databricks auth login --host https://<workspace>",
    )


def run_checks(lake: str, packages: list[str]) -> list[Check]:
    """Every check, in the order a run needs them."""
    return [java_check(), jar_check(packages), lake_check(lake), bundle_check(), databricks_check()]


MARKS = {True: ("ok", "green"), False: ("FAIL", "bold red"), None: ("--", "dim")}


def render(checks: list[Check]) -> Table:
    """One row per check (ok, FAIL or --), and under a problem the line that fixes it."""
    shown = console.table("", "check", "detail")
    shown.show_header = False
    for check in checks:
        mark, style = MARKS[check.ok]
        shown.add_row(Text(mark, style=style), check.name, check.detail)
        if check.fix and check.ok is not True:
            shown.add_row("", "", f"fix: {check.fix}")
    return shown
