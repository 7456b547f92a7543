"""A small delivery, timed as whole processes: ``medallion run`` against the batch ceiling.

    .venv/bin/python benchmarks/deliveries.py [--delivery 5000] [--history 20000] [--repeat 3]

A lake is built once from ``--history`` generated events (the ``incremental`` part's small
history, benchmarks/incremental.py). Then a delivery of ``--delivery`` events from their own
seed (with re-sent copies of history events) lands, and two processes run, each timed from
its start to its exit, JVM start included:

- ``medallion run --landing DIR --lake DIR``: available now, every stream, tables already there;
- the batch ceiling (benchmarks/peers/batch_ceiling.py) on the same delivery's files alone:
  one Spark job reading them and appending them to a bronze table.

Each pair runs ``--repeat`` times, alternating, with the lake put back in between; the medians
count. Prints one ``BENCH_RESULT`` line with both medians and their ratio.

``--history-landing DIR --history-lake DIR`` take an existing lake, built by medallion from that
landing folder, as the history instead of building one (``bench.py --quick`` passes its
backfill's: the smoke test then starts one JVM fewer). The delivery lands in that folder and is
removed from it afterwards; the lake is copied, never changed.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import time
from pathlib import Path

from incremental import DELIVERY_SEED, MEDALLION, delivery_lines, history_lake
from measure import PYTHON, REPO
from peers.common import finish

from medallion.generate import write_file_atomically


def _timed(command: list[str], log: Path) -> float:
    started = time.monotonic()
    with open(log, "a") as out:
        subprocess.run(command, cwd=REPO, stdout=out, stderr=out, check=True)
    return time.monotonic() - started


def _land(folder: Path, lines: list[str]) -> list[Path]:
    """The delivery as two files in ``folder``."""
    half = len(lines) // 2
    paths = []
    for i, part in enumerate((lines[:half], lines[half:])):
        name = f"events-{DELIVERY_SEED}-small-delivery-{i}.json"
        write_file_atomically(str(folder), name, part)
        paths.append(folder / name)
    return paths


def _given_history(work: Path, lake: Path) -> Path:
    """A folder whose ``lake.base`` is a copy of ``lake``, as :func:`history_lake` leaves it."""
    root = work / "history-given"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    shutil.copytree(lake, root / "lake.base", symlinks=True)
    return root


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--delivery", type=int, default=5_000, help="events in the delivery")
    parser.add_argument("--history", type=int, default=20_000, help="events in the lake")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each; the medians count")
    parser.add_argument("--workdir", type=Path, default=REPO / "build" / "bench" / "incremental")
    parser.add_argument("--history-landing", type=Path, help="the landing folder of --history-lake")
    parser.add_argument("--history-lake", type=Path, help="a lake built from --history-landing")
    args = parser.parse_args()
    if (args.history_landing is None) != (args.history_lake is None):
        parser.error("--history-landing and --history-lake go together")
    args.workdir.mkdir(parents=True, exist_ok=True)
    log = args.workdir / "deliveries.log"
    if args.history_lake is None:
        root = history_lake(args.workdir, args.history, log)
        landing = root / "landing"
    else:
        root, landing = _given_history(args.workdir, args.history_lake), args.history_landing
    lines = delivery_lines(landing, args.delivery)
    ceiling_landing = args.workdir / "delivery-alone"
    shutil.rmtree(ceiling_landing, ignore_errors=True)
    _land(ceiling_landing / "events", lines)
    ours, ceiling = [], []
    for _ in range(args.repeat):
        lake = root / "lake"
        shutil.rmtree(lake, ignore_errors=True)
        shutil.copytree(root / "lake.base", lake, symlinks=True)
        landed = _land(landing / "events", lines)
        try:
            run = ["run", "--landing", str(landing), "--lake", str(lake)]
            ours.append(_timed([*MEDALLION, *run], log))
        finally:
            for path in landed:
                path.unlink(missing_ok=True)
        ceiling.append(
            _timed(
                [
                    PYTHON,
                    "benchmarks/peers/batch_ceiling.py",
                    "--landing",
                    str(ceiling_landing),
                    "--workdir",
                    str(args.workdir / "ceiling-lake"),
                ],
                log,
            )
        )
    result = {
        "delivery_events": args.delivery,
        "delivery_lines": len(lines),
        "history_events": args.history,
        "medallion_process_s": [round(t, 2) for t in ours],
        "ceiling_process_s": [round(t, 2) for t in ceiling],
        "medallion_median_s": round(statistics.median(ours), 2),
        "ceiling_median_s": round(statistics.median(ceiling), 2),
    }
    result["ratio"] = round(result["medallion_median_s"] / result["ceiling_median_s"], 3)
    finish(result)


if __name__ == "__main__":
    main()
