"""Does a delivery cost more on a lake with a long history? The ``incremental`` part of the bench.

    .venv/bin/python benchmarks/incremental.py [--small 20000] [--large 1500000]
                                               [--delivery 40000] [--workdir DIR]

For each history size, a lake is built once (``medallion run`` over that many generated
events, seed 1) and kept. Then the same delivery is landed on top of it and run with
``medallion run`` (a whole process, available now, tables already there): 40,000 events from
their own seed (2), plus re-sent copies of events the history already holds (2.5% of the
delivery, taken from the history's files, some identical and some with altered content) and
late events up to 30 days old. Afterwards the lake and landing folder are put back as they
were, so a rerun measures the same thing.

The *pipeline span* is read from the Delta logs: from the first bronze commit of the delivery
to the last silver or gold commit. ``--large 10000000`` is the soak. Each run also checks what
must hold whatever the history: one silver row per ``event_id``, gold's hourly totals equal to
silver's rows aggregated afresh, and its daily revenue per day (over every country) equal to
silver's purchases (read with ``deltalake``, no JVM).

Prints one ``BENCH_RESULT`` line: per history size, the span, the process wall time, its peak
RSS (Python and JVM), the history build's wall time and peak RSS, and the
per-table commit times; and ``span_ratio``, large over small.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path

from measure import PYTHON, REPO, TreeSampler, read_commits
from peers.common import finish

from medallion.generate import FaultRates, write_file_atomically
from medallion.pipelines.retail.generator import generate, generate_event_lines

MEDALLION = [PYTHON, "-m", "medallion.cli"]
# The bench's fault mix (benchmarks/bench.py): ~1% invalid, 5% re-sent duplicates.
FAULTS = FaultRates(invalid=0.007, malformed=0.003, duplicate=0.05)
DELIVERY_SEED = 2
RESENT_SHARE = 0.025
PIPELINE_TABLES = (
    "bronze/events",
    "silver/events",
    "silver/events_quarantine",
    "gold/hourly_product_metrics",
    "gold/daily_revenue_by_country",
)


def _medallion(args: list[str], log: Path) -> tuple[float, float]:
    """Run one ``medallion`` command as a process; its wall time in seconds and the peak RSS
    of its process tree (Python and JVM) in MB."""
    started = time.monotonic()
    with open(log, "a") as out:
        process = subprocess.Popen([*MEDALLION, *args], cwd=REPO, stdout=out, stderr=out)
        with TreeSampler(process.pid) as sampler:
            returncode = process.wait()
    if returncode != 0:
        raise subprocess.CalledProcessError(returncode, [*MEDALLION, *args])
    return time.monotonic() - started, round(sampler.peaks.total_rss_mb, 1)


# What a history lake built by medallion holds besides its tables; a lake built before the
# current format is built again (here: one without the revenue stream's ledger).
HISTORY_FORMAT = "4: the revenue ledger, gold/revenue_purchases"


def history_lake(work: Path, events: int, log: Path) -> Path:
    """A folder with ``landing/`` (``events`` generated events) and ``lake/`` built from it
    once; ``lake.base`` is the copy every measurement starts from."""
    root = work / f"history-{events}"
    if (root / ".complete").exists() and (root / ".complete").read_text() == HISTORY_FORMAT:
        return root
    shutil.rmtree(root, ignore_errors=True)
    files = max(4, events // 20_000)
    generate(
        str(root / "landing"), events=events, customers=2_000, files=files, seed=1, faults=FAULTS
    )
    seconds, peak_rss_mb = _medallion(
        ["run", "--landing", str(root / "landing"), "--lake", str(root / "lake")], log
    )
    print(f"built a lake of {events:,} events in {seconds:.1f} s", flush=True)
    build = {"process_wall_s": round(seconds, 1), "peak_rss_mb": peak_rss_mb}
    (root / "build.json").write_text(json.dumps(build))
    shutil.copytree(root / "lake", root / "lake.base", symlinks=True)
    (root / ".complete").write_text(HISTORY_FORMAT)
    return root


def delivery_lines(history_landing: Path, events: int) -> list[str]:
    """``events`` new events from their own seed, with re-sent copies of history events mixed
    in: half identical, half with another product or user (first arrival still wins)."""
    rng = random.Random(DELIVERY_SEED)
    lines = list(generate_event_lines(events, DELIVERY_SEED, faults=FAULTS))
    old = []
    for path in sorted((history_landing / "events").glob("events-*.json")):
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("event_id"), str):
                old.append(line)
    for line in rng.sample(old, min(len(old), int(events * RESENT_SHARE))):
        if rng.random() < 0.5:
            record = json.loads(line)
            record["product_id"] = f"p{rng.randrange(200):04d}"
            line = json.dumps(record)
        lines.insert(rng.randrange(len(lines) + 1), line)
    return lines


def _versions(lake: Path) -> dict[str, int]:
    return {key: read_commits(str(lake / key))[-1].version for key in PIPELINE_TABLES}


def _commit_times(lake: Path, before: dict[str, int]) -> dict[str, list[float]]:
    return {
        key: [c.timestamp_s for c in read_commits(str(lake / key)) if c.version > before[key]]
        for key in PIPELINE_TABLES
    }


def _revenue_days_differing(lake: Path, silver_rows: list[dict]) -> int:
    """The days whose revenue and purchases, summed over the countries of
    ``gold/daily_revenue_by_country``, differ from silver's purchases of that day."""
    from deltalake import DeltaTable

    wanted: dict = {}
    for row in silver_rows:
        if row["event_type"] == "purchase":
            day = wanted.setdefault(row["event_date"], [Decimal(0), 0])
            day[0] += row["revenue"] or Decimal(0)
            day[1] += 1
    actual: dict = {}
    for row in (
        DeltaTable(str(lake / "gold/daily_revenue_by_country")).to_pyarrow_table().to_pylist()
    ):
        day = actual.setdefault(row["event_date"], [Decimal(0), 0])
        day[0] += row["revenue"]
        day[1] += row["purchases"]
    return sum(1 for day in wanted.keys() | actual.keys() if wanted.get(day) != actual.get(day))


def check_exact(lake: Path) -> dict:
    """One silver row per event_id; gold's hourly rows equal to silver aggregated afresh, and
    its daily revenue, summed over countries, equal to silver's purchases per day."""
    from deltalake import DeltaTable

    columns = ["event_id", "event_type", "user_id", "product_id", "revenue", "event_timestamp"]
    silver = DeltaTable(str(lake / "silver/events")).to_pyarrow_table(
        columns=[*columns, "event_date"]
    )
    ids = silver.column("event_id").to_pylist()
    duplicates = len(ids) - len(set(ids))
    expected: dict[tuple, list] = {}
    users: dict[tuple, set] = {}
    silver_rows = silver.to_pylist()
    for row in silver_rows:
        hour = row["event_timestamp"].replace(minute=0, second=0, microsecond=0)
        key = (hour.replace(tzinfo=None), row["product_id"])
        totals = expected.setdefault(key, [0, 0, 0, Decimal(0)])
        index = ("view", "add_to_cart", "purchase").index(row["event_type"])
        totals[index] += 1
        if row["event_type"] == "purchase":
            totals[3] += row["revenue"] or Decimal(0)
        users.setdefault(key, set()).add(row["user_id"])
    gold = DeltaTable(str(lake / "gold/hourly_product_metrics")).to_pyarrow_table().to_pylist()
    actual = {
        (r["window_start"].replace(tzinfo=None), r["product_id"]): [
            r["views"],
            r["add_to_carts"],
            r["purchases"],
            r["revenue"],
            r["unique_users"],
        ]
        for r in gold
    }
    wanted = {key: [*totals, len(users[key])] for key, totals in expected.items()}
    differing = sum(
        1 for key in wanted.keys() | actual.keys() if wanted.get(key) != actual.get(key)
    )
    revenue_differing = _revenue_days_differing(lake, silver_rows)
    return {
        "silver_rows": len(ids),
        "duplicate_event_ids": duplicates,
        "gold_rows": len(actual),
        "gold_rows_differing": differing,
        "revenue_days_differing": revenue_differing,
        "exact": duplicates == 0 and differing == 0 and revenue_differing == 0,
    }


@contextmanager
def landed(landing: Path, lines: list[str], parts: int = 4) -> Iterator[None]:
    """The delivery's lines landed in ``parts`` event files for as long as the block runs."""
    size = -(-len(lines) // parts)
    names = []
    try:
        for i in range(parts):
            name = f"events-{DELIVERY_SEED}-delivery-{i:02d}.json"
            write_file_atomically(str(landing / "events"), name, lines[i * size : (i + 1) * size])
            names.append(name)
        yield
    finally:
        for name in names:
            (landing / "events" / name).unlink(missing_ok=True)


def restore(root: Path) -> Path:
    """The history lake put back as it was built (``lake.base``); its path."""
    lake = root / "lake"
    shutil.rmtree(lake, ignore_errors=True)
    shutil.copytree(root / "lake.base", lake, symlinks=True)
    return lake


def measure(root: Path, lines: list[str], log: Path, check: bool) -> dict:
    """Land the delivery on the history lake, run it, read the span; then put everything back."""
    lake = restore(root)
    before = _versions(lake)
    with landed(root / "landing", lines):
        wall, peak_rss_mb = _medallion(
            ["run", "--landing", str(root / "landing"), "--lake", str(lake)], log
        )
        times = _commit_times(lake, before)
        result = {"process_wall_s": round(wall, 2), "peak_rss_mb": peak_rss_mb}
        if check:
            result["exactness"] = check_exact(lake)
    start = min(times["bronze/events"])
    end = max(t for key in PIPELINE_TABLES[1:] for t in times[key])
    result["span_s"] = round(end - start, 2)
    result["commits"] = {
        key: {"count": len(ts), "last_after_start_s": round(max(ts) - start, 2) if ts else None}
        for key, ts in times.items()
    }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--small", type=int, default=20_000, help="events in the small history")
    parser.add_argument(
        "--large", type=int, default=1_500_000, help="events in the large history (10M: the soak)"
    )
    parser.add_argument("--delivery", type=int, default=40_000, help="new events in the delivery")
    parser.add_argument("--repeat", type=int, default=3, help="runs per history; the median counts")
    parser.add_argument("--no-check", action="store_true", help="skip the exactness check")
    parser.add_argument("--workdir", type=Path, default=REPO / "build" / "bench" / "incremental")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    log = args.workdir / "incremental.log"
    results: dict = {"delivery_events": args.delivery}
    for label, events in (("small", args.small), ("large", args.large)):
        root = history_lake(args.workdir, events, log)
        lines = delivery_lines(root / "landing", args.delivery)
        runs = [
            measure(root, lines, log, check=not args.no_check and i == 0)
            for i in range(args.repeat)
        ]
        exactness = runs[0].get("exactness")
        runs.sort(key=lambda r: r["span_s"])
        median = runs[len(runs) // 2]
        median["exactness"] = exactness  # checked on the first run
        median["spans_s"] = [r["span_s"] for r in runs]
        median["history_events"] = events
        median["delivery_lines"] = len(lines)
        build = root / "build.json"
        median["history_build"] = json.loads(build.read_text()) if build.exists() else None
        results[label] = median
        print(f"{label} history ({events:,} events): span {median['span_s']} s", flush=True)
    results["span_ratio"] = round(results["large"]["span_s"] / results["small"]["span_s"], 3)
    finish(results)


if __name__ == "__main__":
    main()
