"""Writes tests/data/old-layout-lake.tar.gz: a retail lake written by the code from before
pipelines were declared, for tests/integration/test_layout_continuity.py.

The code of commit ``07c36dc`` (its ``src`` folder, from this repository's history) runs once on
one delivery of generated events and customer changes. The archive holds that delivery
(``landing/``), the lake it wrote (``lake/``) and ``manifest.json``: the commit, and the folder
the lake was written in, which its checkpoints name (the file source records each file it read
by its full path); the test moves the lake to its own folder and rewrites that name.

Run it again from the repository's root (a full clone, with history) after changing the
generator's first delivery:
    .venv/bin/python tests/data/make_old_layout_lake.py
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARCHIVE = Path(__file__).resolve().parent / "old-layout-lake.tar.gz"
# The last commit whose retail tables and flows were not declared (pipelines/retail came next).
BEFORE_DECLARATIONS = "07c36dcb715ac980a23573457f3701bdb728dc0a"
# The delivery the old code ran on (the test lands a second one before today's code runs).
FIRST_DELIVERY = {"events": 400, "customers": 40, "files": 2, "seed": 31}


def old_source(target: Path) -> Path:
    """The ``src`` folder of :data:`BEFORE_DECLARATIONS`, from the repository's history."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", BEFORE_DECLARATIONS, "src"],
        capture_output=True,
        check=True,
    )
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(target, filter="data")
    return target / "src"


def main() -> None:
    sys.path.insert(0, str(ROOT / "src"))
    from medallion.pipelines.retail.generator import generate

    with tempfile.TemporaryDirectory(prefix="medallion-old-layout-") as work:
        base = Path(work)
        src = old_source(base / "old")
        landing, lake = base / "landing", base / "lake"
        generate(str(landing), **FIRST_DELIVERY)
        code = "import sys, medallion; print(medallion.__file__); "
        code += "from medallion.cli import main; sys.exit(main(sys.argv[1:]))"
        run = subprocess.run(
            [sys.executable, "-c", code, "run", "--landing", str(landing), "--lake", str(lake)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(src)},
            cwd=base,
        )
        if run.returncode:
            raise SystemExit(run.stderr[-3000:])
        assert run.stdout.startswith(str(src)), "the old code ran"
        assert not (src / "medallion" / "pipelines").exists()
        manifest = {"commit": BEFORE_DECLARATIONS, "root": str(base), **FIRST_DELIVERY}
        (base / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
        # PAX keeps the files' modification times to the microsecond: the checkpoints record them.
        with tarfile.open(ARCHIVE, "w:gz", format=tarfile.PAX_FORMAT) as tar:
            for name in ("manifest.json", "landing", "lake"):
                tar.add(base / name, arcname=name)
    print(f"wrote {ARCHIVE.relative_to(ROOT)} ({ARCHIVE.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
