"""Moving a landing folder and its lake elsewhere, so that the lake's streams go on from where
they stopped: for lakes built once and then continued by several tests.

Delta tables hold relative paths and move as they are. The checkpoints do not: a file source
records each landed file it read by its full path (``sources/``), and medallion records their
sizes and modification times (``_medallion_landed_sizes.jsonl``). Those names are rewritten to
the new folder, and each landed file keeps the modification time its checkpoint recorded.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path


def follow_move(lake: Path, old_root: str, new_root: str) -> None:
    """Rewrite ``old_root`` to ``new_root`` in the checkpoints of ``lake`` (already moved), and
    give each landed file its recorded modification time."""
    old, new = f"{old_root.rstrip('/')}/".encode(), f"{new_root.rstrip('/')}/".encode()
    for path in (lake / "_checkpoints").rglob("*"):
        if path.is_file() and old in (content := path.read_bytes()):
            path.write_bytes(content.replace(old, new))
            # Hadoop checks a file against its .crc sidecar when it has one.
            path.with_name(f".{path.name}.crc").unlink(missing_ok=True)
    for landed in (lake / "_checkpoints").glob("*/_medallion_landed_sizes.jsonl"):
        for line in landed.read_text().splitlines():
            record = json.loads(line)
            if os.path.exists(record["path"]):
                os.utime(record["path"], ns=(record["mtime"] * 1_000_000,) * 2)


def copy_lake(root: Path, target: Path) -> tuple[Path, Path]:
    """Copy ``root/landing`` and ``root/lake`` into ``target``; the copy's streams continue
    where the original's stopped. Returns the copy's (landing, lake)."""
    for name in ("landing", "lake"):
        shutil.copytree(root / name, target / name, symlinks=True)
    follow_move(target / "lake", str(root), str(target))
    return target / "landing", target / "lake"
