"""The tutorial's pipeline (docs/writing-a-pipeline.md), built from the page itself: its files
are written to a temporary folder outside medallion's package, found through
``$MEDALLION_PIPELINES``, and run by ``medallion run`` in two deliveries with late events,
re-sent copies, cancellations and invalid lines. Silver and gold equal a plain-Python reading
of the landed lines, and the page keeps its promises: at most 120 lines outside the generator,
importing nothing of the engine beyond the declarations' public API."""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import pytest
from deltalake import DeltaTable

from medallion.cli import main
from medallion.pipelines import registered

pytestmark = pytest.mark.slow  # left out of make test-fast (docs/testing.md)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "writing-a-pipeline.md"
PUBLIC = {"medallion.declarations", "medallion.pipelines", "medallion.pipelines.blocks"}
STATUSES = ("created", "picked_up", "in_transit", "delivered", "cancelled")


def _files_of_the_page() -> dict[str, str]:
    """The page's Python blocks whose first line names a file of the package (``# shipments/x.py``)."""
    files = {}
    for block in re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S):
        first, _, rest = block.partition("\n")
        if re.fullmatch(r"# shipments/\w+\.py", first.strip()):
            files[first.strip()[2:]] = rest
    return files


def _valid(line: str) -> dict | None:
    """The event a line holds when the contract accepts it, else None."""
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if not isinstance(event, dict):
        return None
    shipment, sequence, status = (event.get(k) for k in ("shipment_id", "sequence", "status"))
    location = event.get("location")
    if not isinstance(shipment, str) or not shipment.strip() or status not in STATUSES:
        return None
    if not isinstance(sequence, int) or isinstance(sequence, bool):
        return None
    if location is not None and not isinstance(location, str):
        return None
    try:
        if datetime.fromisoformat(event["event_time"]).tzinfo is None:
            return None
    except (KeyError, TypeError, ValueError):
        return None
    return event


def _expected(landing: Path) -> tuple[dict, Counter, int]:
    """Each current parcel's (sequence, status), the count per status, and the refused lines."""
    events, refused = {}, 0
    for path in sorted((landing / "shipment_events").iterdir()):
        for line in path.read_text().splitlines():
            event = _valid(line)
            if event is None:
                refused += 1
                continue
            events.setdefault((event["shipment_id"], event["sequence"]), event)  # the first copy
    newest: dict[str, dict] = {}
    for (shipment, sequence), event in events.items():
        if shipment not in newest or sequence > newest[shipment]["sequence"]:
            newest[shipment] = event
    current = {
        s: (e["sequence"], e["status"]) for s, e in newest.items() if e["status"] != "cancelled"
    }
    return current, Counter(status for _, status in current.values()), refused


def _medallion(folder: Path, *args: str) -> str:
    """A new process, which finds the pipeline through ``$MEDALLION_PIPELINES``."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]),
        "MEDALLION_PIPELINES": "shipments",
    }
    command = [sys.executable, "-m", "medallion.cli", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    return done.stdout


@contextmanager
def _registered_from(folder: Path) -> Iterator[None]:
    """The package in ``folder`` imported and registered in this process, for the test only:
    its runs share the test session's Spark (no JVM started per run)."""
    sys.path.insert(0, str(folder))
    try:
        with registered(importlib.import_module("shipments").SHIPMENTS_PIPELINE):
            yield
    finally:
        sys.path.remove(str(folder))
        for name in [m for m in sys.modules if m == "shipments" or m.startswith("shipments.")]:
            del sys.modules[name]


def _in_process(capsys, *args: str) -> str:
    capsys.readouterr()
    assert main(list(args)) == 0, " ".join(args)
    return capsys.readouterr().out


def _rows(path: Path) -> list[dict]:
    return DeltaTable(str(path)).to_pyarrow_table().to_pylist()


def test_the_page_holds_a_pipeline_in_at_most_120_lines_of_public_api():
    files = _files_of_the_page()
    assert set(files) == {"shipments/__init__.py", "shipments/generator.py"}
    example = [text for name, text in files.items() if name != "shipments/generator.py"]
    assert sum(len(text.splitlines()) for text in example) <= 120
    for text in files.values():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and node.module.startswith("medallion"):
                assert node.module in PUBLIC, node.module
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("medallion") for a in node.names)


def test_the_tutorial_pipeline_runs_from_a_folder_of_its_own_and_equals_plain_python(
    tmp_path, capsys
):
    folder = tmp_path / "packages"
    for name, text in _files_of_the_page().items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    assert "shipments" in _medallion(folder, "pipelines")  # found through $MEDALLION_PIPELINES

    staged, landing, lake = tmp_path / "staged", tmp_path / "landing", tmp_path / "lake"
    with _registered_from(folder):
        args = ("--records", "700", "--files", "4", "--seed", "5", "--pipeline", "shipments")
        _in_process(capsys, "generate", "--landing", str(staged), *args)
        files = sorted((staged / "shipment_events").iterdir())
        (landing / "shipment_events").mkdir(parents=True)
        # Two deliveries: the second holds events older than some the first applied.
        for delivery in (files[:2], files[2:]):
            for path in delivery:
                shutil.copy2(path, landing / "shipment_events" / path.name)
            _in_process(capsys, "run", "--landing", str(landing), "--lake", str(lake), *args[-2:])
        # The page's status and show commands, on this lake.
        page = PAGE.read_text()
        for command in re.findall(r"^medallion (status|show) (.*?)\s*(?:#.*)?$", page, re.M):
            argv = [command[0], *command[1].replace("/tmp/lake", str(lake)).split()]
            assert "shipments" in _in_process(capsys, *argv)

    current, per_status, refused = _expected(landing)
    first = [_valid(line) for path in files[:2] for line in path.read_text().splitlines()]
    newest_first: dict[str, int] = {}
    for event in filter(None, first):
        newest_first[event["shipment_id"]] = max(
            event["sequence"], newest_first.get(event["shipment_id"], 0)
        )
    later = [_valid(line) for path in files[2:] for line in path.read_text().splitlines()]
    late = [e for e in filter(None, later) if e["sequence"] < newest_first.get(e["shipment_id"], 0)]
    cancelled = {
        e["shipment_id"] for e in filter(None, first + later) if e["status"] == "cancelled"
    }
    assert late and cancelled  # the second delivery is late for some parcels; some are cancelled
    assert per_status["cancelled"] == 0 and len(current) > 50 and refused > 0
    shipments = _rows(lake / "silver" / "shipments")
    assert {r["shipment_id"]: (r["sequence"], r["status"]) for r in shipments} == current
    assert len(shipments) == len(current)
    gold = _rows(lake / "gold" / "shipments_per_status")
    assert {r["status"]: r["shipments"] for r in gold} == dict(per_status)
    quarantine = _rows(lake / "silver" / "shipment_events_quarantine")
    assert len(quarantine) == refused and all(r["reason"] for r in quarantine)
