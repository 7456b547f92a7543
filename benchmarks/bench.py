"""medallion against its peers, on the same input and machine, in one run: ``make bench``.

    .venv/bin/python benchmarks/bench.py [--events N] [--quick] [--out DIR]

1. Backfill: N generated events (~1% invalid, 5% re-sent duplicates) in 100 files through
   every layer with available-now triggers; wall time, events/s end to end and per layer,
   peak driver RSS (Python + JVM) and peak JVM heap in use.
2. Peers on the same files: the tutorial-style pipeline, Spark Declarative Pipelines, and the
   batch ceiling (benchmarks/peers/); each peer's gold totals are checked against ours.
3. Latency of ``medallion run --stream`` while a 1,000-event file lands every second.
4. Recovery after SIGKILL during steady streaming.
5. Files per table after 200 micro-batches, with and without compaction.
6. Backfill time at three input sizes, and per-batch time against the lake's size during a
   long stream (growth).
7. Incremental: one 40,000-event delivery on a lake of 20,000 events and on one of 1.5M
   (benchmarks/incremental.py): its pipeline span must not grow with the history.
8. Small deliveries: ``medallion run`` of a 5,000-event delivery on an existing lake against a
   batch-ceiling process on the same files, both timed as whole processes
   (benchmarks/deliveries.py).
9. Tagged writes: what txnAppId/txnVersion and medallion's batch tags cost one Delta append
   (benchmarks/tagged_writes.py), the fixed cost behind the streaming latency.

Every part runs in its own process (its own JVM), measured from outside. Writes
``<out>/<timestamp>.json``, ``latest.json``, ``latest.md`` (the table the README quotes) and
``latest.png``; prints the Markdown and the target checks. ``--quick`` is the smoke-test size.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import time
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import psutil
from measure import REPO, run_child
from streaming import measure_growth, measure_latency, measure_recovery

from medallion.generate import FaultRates
from medallion.pipelines.retail.generator import generate

# ~1% invalid (0.7% breaking a rule, 0.3% malformed JSON), 5% re-sent duplicates.
BENCH_FAULTS = FaultRates(invalid=0.007, malformed=0.003, duplicate=0.05)
FILES = 100
CUSTOMERS = 2_000

# The streaming latency runs: (results key, trigger interval (None: the default), pipeline).
LATENCY_RUNS = (
    ("latency", None, "medallion"),
    ("latency_short_interval", 0.2, "medallion"),
    ("latency_tutorial", None, "tutorial"),
    ("latency_floor", None, "floor"),
)
TARGETS = {
    # Issue 28's targets: a backfill at most 2.5x the batch ceiling's time, and at least as
    # many events/s as Declarative Pipelines.
    "backfill_vs_ceiling": 2.5,
    "throughput_vs_sdp": 1.0,
    "p95_gold_s": 5.0,
    "p95_silver_s": 3.0,
    "driver_rss_mb": 2048,
    "scaling_exponent": 1.0,  # cost grows no worse than linearly
    "incremental_span_ratio": 1.3,  # a delivery's span on 1.5M events of history vs 20,000
    "delivery_vs_ceiling": 2.0,  # a small delivery's whole process vs the ceiling's process
    "growth_ratio": 1.3,  # a batch's time late in a long stream vs early in it
    # Declarative Pipelines' views recomputed on a 1.5M lake / medallion's run of the delivery
    "refresh_vs_sdp": 5.0,
}


def _dataset(root: Path, events: int) -> str:
    """Generate (once) N events in 100 files plus customer changes; return the landing dir."""
    landing = root / f"data-{events}" / "landing"
    if not (landing / ".complete").exists():
        shutil.rmtree(landing, ignore_errors=True)
        generate(
            str(landing),
            events=events,
            customers=CUSTOMERS,
            files=FILES,
            seed=1,
            faults=BENCH_FAULTS,
        )
        (landing / ".complete").write_text("")
    return str(landing)


def _child(script: str, landing: str, workdir: Path, logs: Path, timeout: float) -> dict:
    run = run_child(
        [f"benchmarks/{script}", "--landing", landing, "--workdir", str(workdir)],
        logs / f"{Path(script).stem}.log",
        timeout,
    )
    return {
        **run.result,
        "process_wall_s": round(run.wall_s, 2),
        "peak_python_rss_mb": round(run.peaks.python_rss_mb),
        "peak_jvm_rss_mb": round(run.peaks.jvm_rss_mb),
        "peak_total_rss_mb": round(run.peaks.total_rss_mb),
        "peak_jvm_heap_used_mb": round(run.peaks.jvm_heap_used_mb),
    }


def _gold_diff(ours: dict, theirs: dict | None) -> dict | None:
    """Per total, theirs minus ours (only the totals that differ); None when they match."""
    if not theirs:
        return {"error": "no gold totals"}
    diff = {}
    for key, value in ours.items():
        other = theirs.get(key)
        if key == "revenue":
            delta = Decimal(other or 0) - Decimal(value)
            if delta:
                diff[key] = str(delta)
        elif other != value:
            diff[key] = (other or 0) - value
    return diff or None


def _scaling_exponent(points: list[tuple[int, float]]) -> float | None:
    """The slope of log(time) against log(events), least squares: 1.0 is linear."""
    if len(points) < 2:
        return None
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(t) for _, t in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )


def _checks(results: dict) -> list[dict]:
    """Each target: measured value, limit, met or not, and by how much it is missed."""
    checks = []

    def check(name: str, measured: float | None, limit: float, lower_is_better: bool) -> None:
        if measured is None:
            checks.append(
                {
                    "target": name,
                    "measured": None,
                    "limit": limit,
                    "met": False,
                    "miss": "not measured",
                }
            )
            return
        met = measured <= limit if lower_is_better else measured >= limit
        miss = None
        if not met:
            ratio = measured / limit if lower_is_better else limit / measured
            miss = f"missed by {ratio:.2f}x ({measured:.3g} vs {limit:.3g})"
        checks.append(
            {
                "target": name,
                "measured": round(measured, 3),
                "limit": limit,
                "met": met,
                "miss": miss,
            }
        )

    backfill = results["backfill"]
    peers = results["peers"]
    ours = backfill["wall_s"]
    ceiling = peers.get("batch_ceiling", {}).get("wall_s")
    check(
        "backfill time / batch ceiling time",
        ours / ceiling if ceiling else None,
        TARGETS["backfill_vs_ceiling"],
        True,
    )
    sdp = peers.get("sdp", {})
    sdp_time = sdp.get("pipeline_s") or sdp.get("wall_s")
    identical = sdp.get("gold_diff") is None and "error" not in sdp
    check(
        "throughput / Declarative Pipelines throughput (identical gold)",
        sdp_time / ours if sdp_time and identical else None,
        TARGETS["throughput_vs_sdp"],
        False,
    )
    latency = results.get("latency", {}).get("layers", {})
    check(
        "p95 landing-to-gold (s)", latency.get("gold", {}).get("p95_s"), TARGETS["p95_gold_s"], True
    )
    check(
        "p95 landing-to-silver (s)",
        latency.get("silver", {}).get("p95_s"),
        TARGETS["p95_silver_s"],
        True,
    )
    check(
        "peak driver RSS, Python + JVM (MB)",
        backfill.get("peak_total_rss_mb"),
        TARGETS["driver_rss_mb"],
        True,
    )
    check(
        "scaling exponent (time ~ events^k)",
        results.get("scaling", {}).get("exponent"),
        TARGETS["scaling_exponent"],
        True,
    )
    incremental = results.get("incremental", {})
    check(
        "delivery span, 1.5M-event history / 20,000-event history",
        incremental.get("span_ratio"),
        TARGETS["incremental_span_ratio"],
        True,
    )
    check(
        "small delivery process / batch-ceiling process",
        results.get("deliveries", {}).get("ratio"),
        TARGETS["delivery_vs_ceiling"],
        True,
    )
    check(
        "batch time late in a long stream / early in it",
        results.get("growth", {}).get("last_over_first"),
        TARGETS["growth_ratio"],
        True,
    )
    refresh = results.get("refresh", {})
    check(
        "a delivery on a 1.5M lake: Declarative Pipelines' views recomputed / medallion run "
        "(identical gold)",
        refresh.get("ratio") if refresh.get("gold_identical") else None,
        TARGETS["refresh_vs_sdp"],
        False,
    )
    return checks


def _machine() -> dict:
    return {
        "cpus": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "cpu_model": next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            platform.processor(),
        )
        if Path("/proc/cpuinfo").exists()
        else platform.processor(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


# Parts kept only in a run's results: a run that skips one quotes the previous run's.
RESULT_PARTS = (
    "latency",
    "latency_short_interval",
    "latency_tutorial",
    "latency_floor",
    "recovery",
    "scaling",
    "growth",
)
# Parts kept in files of their own in the results folder, which a skipped part is read from.
FILE_PARTS = ("small_files", "deliveries", "incremental", "refresh", "tagged_writes")


def _carry_skipped(results: dict, skip: set[str], previous: dict) -> None:
    """Quote the parts this run skipped from ``previous`` (the last run's results, of the same
    size), naming when each was measured in ``carried_from``: the parts of the results the run
    lacks, and the parts read from their files that it skipped."""
    if (previous.get("quick"), previous.get("events")) != (results["quick"], results["events"]):
        return
    earlier = previous.get("carried_from") or {}
    carried = [p for p in RESULT_PARTS if p not in results and p in previous]
    for part in carried:
        results[part] = previous[part]
    carried += [p for p in FILE_PARTS if p in skip and p in results and p in previous]
    if carried:
        results["carried_from"] = {p: earlier.get(p, previous["started_at"]) for p in carried}


def _carried(results: dict) -> list[str]:
    """A line naming the parts a run skipped and took from earlier runs (``carried_from``:
    part -> when it was measured), if any."""
    carried = results.get("carried_from") or {}
    if not carried:
        return []
    parts = ", ".join(f"{part} ({when})" for part, when in sorted(carried.items()))
    return ["", f"Not measured in this run, quoted from earlier runs: {parts}."]


def markdown(results: dict) -> str:
    """The results as the Markdown tables the README quotes."""
    n = results["events"]
    machine = results["machine"]
    backfill = results["backfill"]
    lines = [
        f"Run {results['started_at']} on {machine['cpus']} cores ({machine['cpu_model']}), "
        f"{machine['memory_gb']} GiB, Spark local[2]; {n:,} events in {FILES} files"
        + (" (quick mode)" if results["quick"] else "")
        + ".",
        *_carried(results),
        "",
        "| pipeline | wall s | events/s | bronze s | silver s | gold s | peak RSS MB (Py+JVM) "
        "| peak heap MB | gold vs medallion |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    rows = [("medallion", backfill)] + list(results["peers"].items())
    for name, row in rows:
        if "error" in row:
            lines.append(f"| {name} | failed: {row['error'][:80]} | | | | | | | |")
            continue
        wall = row.get("pipeline_s") or row["wall_s"]
        # The SDP peer reports its flows (bronze_events, ...): one per layer.
        flows = {name.split("_")[0]: t for name, t in (row.get("flows_s") or {}).items()}
        layers = row.get("layers_s") or flows
        diff = (
            "identical"
            if name == "medallion" or row.get("gold_diff") is None
            else (
                ", ".join(
                    f"{k} {v:+}" if not isinstance(v, str) else f"{k} {v}"
                    for k, v in row["gold_diff"].items()
                )
            )
        )
        if name == "batch_ceiling":
            diff = "bronze only: " + (
                "same rows"
                if row.get("bronze_rows") == backfill["bronze_rows"]
                else f"{row.get('bronze_rows')} rows vs {backfill['bronze_rows']}"
            )
        lines.append(
            f"| {name} | {wall:.1f} | {n / wall:,.0f} | "
            + " | ".join(
                f"{layers[k]:.1f}" if k in layers else "" for k in ("bronze", "silver", "gold")
            )
            + f" | {row.get('peak_total_rss_mb', '')} | {row.get('peak_jvm_heap_used_mb', '')} | {diff} |"
        )
    for key, _, pipeline in LATENCY_RUNS:
        latency = results.get(key)
        if not latency:
            continue
        who = {
            "tutorial": "the tutorial peer's three streams, ",
            "floor": "one plain stream appending each file to a Delta table (the tutorial's "
            "bronze alone), ",
        }.get(pipeline, "")
        lines += [
            "",
            f"Streaming latency, {who}landing to queryable ({latency['files']} files of "
            f"{latency['events_per_file']:,} events, one a second, trigger interval "
            f"{latency['interval_s'] or 'default (0.5 s)'}):",
            "",
            "| layer | p50 s | p95 s | p99 s | max s |",
            "|---|---:|---:|---:|---:|",
        ]
        for layer in ("bronze", "silver", "gold"):
            s = latency["layers"].get(layer, {})
            if not s.get("files"):
                continue  # a layer the pipeline does not have
            lines.append(
                f"| {layer} | {s.get('p50_s')} | {s.get('p95_s')} | {s.get('p99_s')} "
                f"| {s.get('max_s')} |"
            )
    recovery = results.get("recovery")
    if recovery:
        lines += [
            "",
            f"Recovery after SIGKILL ({recovery['backlog_files']} files landed by the "
            f"restart): first committed batch {recovery['restart_to_first_batch_s']} s after "
            f"the restart, caught up in gold after {recovery['restart_to_caught_up_s']} s "
            "(both include the new JVM's start).",
        ]
    small = results.get("small_files")
    if small:
        lines += [
            "",
            f"Files per table after {small['on']['batches']} micro-batches:",
            "",
            "| table | with compaction | without |",
            "|---|---:|---:|",
        ]
        last = str(small["on"]["batches"])
        for table, on in small["on"]["samples"][last].items():
            off = small["off"]["samples"][last][table]
            lines.append(f"| {table} | {on['files']} | {off['files']} |")
    scaling = results.get("scaling")
    if scaling:
        lines += [
            "",
            "Backfill scaling: "
            + ", ".join(f"{p['events']:,} events in {p['wall_s']:.1f} s" for p in scaling["points"])
            + f"; time grows as events^{scaling['exponent']:.2f}.",
        ]
    growth = results.get("growth")
    if growth:
        lines += [
            "",
            f"Growth: a stream fed {growth['events_per_file']:,} events a second for "
            f"{growth['seconds']:.0f} s ({growth['lines']:,} lines, {growth['batches']} batches); "
            "median batch time by the lines already ingested:",
            "",
            "| lines before | batches | median batch s | median rows |",
            "|---:|---:|---:|---:|",
            *(
                f"| {w['lines_before']:,} | {w['batches']} | {w['median_batch_s']} "
                f"| {w['median_rows']:,} |"
                for w in growth["windows"]
            ),
        ]
    deliveries = results.get("deliveries")
    if deliveries:
        lines += [
            "",
            f"Small delivery: {deliveries['delivery_events']:,} events on a lake of "
            f"{deliveries['history_events']:,}, whole processes (JVM start included), median of "
            f"{len(deliveries['medallion_process_s'])}: medallion run "
            f"{deliveries['medallion_median_s']} s, batch ceiling "
            f"{deliveries['ceiling_median_s']} s ({deliveries['ratio']}x).",
        ]
    incremental = results.get("incremental")
    if incremental:
        small, large = incremental["small"], incremental["large"]
        lines += [
            "",
            f"Incremental: a delivery of {incremental['delivery_events']:,} new events (plus "
            "re-sent copies of old ones) has a pipeline span of "
            f"{small['span_s']} s on a lake of {small['history_events']:,} events and "
            f"{large['span_s']} s on one of {large['history_events']:,} "
            f"({incremental['span_ratio']}x; medians of {small['spans_s']} s and "
            f"{large['spans_s']} s); whole processes {small['process_wall_s']} s and "
            f"{large['process_wall_s']} s.",
        ]
    refresh = results.get("refresh")
    if refresh:
        sdp = refresh["sdp"]
        lines += [
            "",
            f"Refresh: the same delivery ({refresh['delivery_lines']:,} lines) on a lake of "
            f"{refresh['history_events']:,} events, session start excluded: medallion run "
            f"{refresh['medallion']['wall_s']} s (median of {refresh['medallion']['runs_s']}); "
            f"Declarative Pipelines recomputes its silver and gold views in "
            f"{sdp['recompute_s']} s ({refresh['ratio']}x; its whole run, bronze of every "
            f"file included, {sdp['pipeline_s']} s); gold "
            + ("identical" if refresh["gold_identical"] else "DIFFERENT")
            + f" ({refresh['gold_rows']:,} rows).",
        ]
    tagged = results.get("tagged_writes")
    if tagged:
        lines += [
            "",
            f"Tagged writes: an append of {tagged['rows_per_write']:,} rows takes "
            f"{tagged['tagged_median_s']} s with txnAppId/txnVersion "
            f"({tagged['tagged_jobs_per_write']:g} Spark jobs) and "
            f"{tagged['untagged_median_s']} s without ({tagged['untagged_jobs_per_write']:g}); "
            "Delta rebuilds the table's state to check the pair (docs/benchmarks.md). Tagged "
            f"with its batch, as medallion writes: {tagged['batch_tag_median_s']} s "
            f"({tagged['batch_tag_jobs_per_write']:g}), and "
            f"{tagged['batch_tag_replay_median_s']} s "
            f"({tagged['batch_tag_replay_jobs_per_write']:g}) for a possible replay, which "
            "reads the log's newest commits first.",
        ]
    lines += ["", "| target | measured | limit | met |", "|---|---:|---:|---|"]
    for c in results["checks"]:
        lines.append(
            f"| {c['target']} | {c['measured']} | {c['limit']} | "
            f"{'yes' if c['met'] else 'no: ' + str(c['miss'])} |"
        )
    return "\n".join(lines) + "\n"


LAYER_COLOURS = {"bronze": "#b08d57", "silver": "#a8a9ad", "gold": "#d4af37"}


def _backfill_panel(axis, results: dict) -> None:
    """Backfill time per pipeline, stacked by layer where it reports its layers (the rest of
    its wall time on top; a black line marks the wall time, which layers running side by side
    can exceed), with both time targets as lines, and a peer whose gold differs from
    medallion's hatched and marked."""
    rows = [("medallion", results["backfill"])] + [
        (k, v) for k, v in results["peers"].items() if "error" not in v
    ]
    for position, (name, row) in enumerate(rows):
        total = row.get("pipeline_s") or row["wall_s"]
        layers = row.get("layers_s") or {}
        wrong = name != "medallion" and row.get("gold_diff") is not None
        bottom = 0.0
        for layer in ("bronze", "silver", "gold"):
            if layer in layers:
                axis.bar(
                    position,
                    layers[layer],
                    bottom=bottom,
                    color=LAYER_COLOURS[layer],
                    label=layer if position == 0 else None,
                    hatch="//" if wrong else None,
                )
                bottom += layers[layer]
        axis.bar(
            position,
            max(0.0, total - bottom),
            bottom=bottom,
            color="tab:blue" if name == "medallion" else "tab:gray",
            label="rest (session, planning)" if position == 0 else None,
            hatch="//" if wrong else None,
        )
        # Layers that run side by side can add up to more than the wall time: mark it.
        wall = "wall time" if position == 0 else None
        axis.plot([position - 0.4, position + 0.4], [total, total], color="black", label=wall)
        if wrong:
            top = (position, max(total, bottom))
            axis.annotate("gold differs", top, ha="center", va="bottom", color="red", fontsize=8)
    axis.set_xticks(range(len(rows)), [name for name, _ in rows], rotation=15)
    peers = results["peers"]
    ceiling = peers.get("batch_ceiling", {})
    if "wall_s" in ceiling:
        limit = TARGETS["backfill_vs_ceiling"] * ceiling["wall_s"]
        axis.axhline(
            limit,
            color="red",
            linestyle=":",
            label=f"target: {TARGETS['backfill_vs_ceiling']:g}x the batch ceiling",
        )
    sdp = peers.get("sdp", {})
    if sdp.get("pipeline_s") or sdp.get("wall_s"):
        limit = (sdp.get("pipeline_s") or sdp["wall_s"]) / TARGETS["throughput_vs_sdp"]
        axis.axhline(
            limit,
            color="purple",
            linestyle="--",
            label=f"target: {TARGETS['throughput_vs_sdp']:g}x SDP's throughput",
        )
    axis.set_title(f"Backfill of {results['events']:,} events (s, lower is better)")
    axis.legend(fontsize=7)


def chart(results: dict, path: Path) -> None:
    """Backfill wall time per pipeline, latency percentiles, and scaling, in one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    _backfill_panel(axes[0], results)
    latency = results.get("latency", {}).get("layers", {})
    if latency:
        layers = [layer for layer in ("bronze", "silver", "gold") if latency.get(layer)]
        for offset, q in enumerate(("p50_s", "p95_s", "p99_s")):
            axes[1].bar(
                [i + offset * 0.25 for i in range(len(layers))],
                [latency[layer][q] or 0 for layer in layers],
                width=0.25,
                label=q[:-2],
            )
        axes[1].set_xticks([i + 0.25 for i in range(len(layers))], layers)
        axes[1].axhline(TARGETS["p95_gold_s"], color="red", linestyle=":", label="gold p95 target")
        axes[1].set_title("Landing to queryable (s)")
        axes[1].legend()
    scaling = results.get("scaling", {}).get("points", [])
    if scaling:
        xs = [p["events"] for p in scaling]
        axes[2].plot(xs, [p["wall_s"] for p in scaling], "o-", label="medallion")
        base = scaling[0]
        axes[2].plot(xs, [base["wall_s"] * x / base["events"] for x in xs], ":", label="linear")
        axes[2].set_title("Backfill time vs events (s)")
        axes[2].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--events",
        type=int,
        default=None,
        help="backfill size (default: $BENCH_EVENTS, else 1,000,000; 20,000 with --quick)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke-test sizes: few events, short streams, few micro-batches",
    )
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    parser.add_argument("--workdir", type=Path, default=REPO / "build" / "bench")
    parser.add_argument(
        "--skip",
        default="",
        help="comma-separated parts to leave out: "
        "peers,sdp,latency,recovery,small_files,scaling,growth,incremental,deliveries,"
        "refresh,tagged_writes",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="rewrite latest.md and latest.png from <out>/latest.json, measuring nothing",
    )
    args = parser.parse_args()
    if args.report_only:
        _write_report(json.loads((args.out / "latest.json").read_text()), args.out)
        return
    skip = set(filter(None, args.skip.split(",")))
    events = args.events or (
        20_000 if args.quick else int(os.environ.get("BENCH_EVENTS", 1_000_000))
    )
    stream_seconds, steady_seconds, small_batches = (15, 8, 10) if args.quick else (120, 30, 200)
    growth_seconds = 20 if args.quick else 300
    sizes = sorted({max(1000, events // 4), max(1000, events // 2), events})
    work, logs = args.workdir, args.workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    timeout = 3600.0

    results: dict = {
        "started_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "events": events,
        "files": FILES,
        "quick": args.quick,
        "machine": _machine(),
        "targets": TARGETS,
        "peers": {},
    }
    began = time.monotonic()

    def step(title: str) -> None:
        print(f"[bench {time.monotonic() - began:7.1f}s] {title}", flush=True)

    step(f"generating {events:,} events in {FILES} files")
    landing = _dataset(work, events)
    step("backfill: medallion")
    backfill = _child("ours.py", landing, work / "ours", logs, timeout)
    results["backfill"] = backfill
    peers = [("batch_ceiling", "peers/batch_ceiling.py")]
    if "peers" not in skip:
        peers += [("tutorial", "peers/tutorial.py")]
        if "sdp" not in skip:
            peers += [("sdp", "peers/sdp_peer.py")]
    for name, script in peers:
        step(f"backfill: {name}")
        try:
            row = _child(script, landing, work / name, logs, timeout)
        except RuntimeError as error:
            row = {"error": str(error)}
        if "gold" in row:
            row["gold_diff"] = _gold_diff(backfill["gold"], row["gold"])
        results["peers"][name] = row

    if "latency" not in skip:
        # The default trigger interval (what the target is checked at), then a short one: the
        # difference is what waiting for triggers costs, the rest is the batches themselves.
        # The tutorial peer's three plain streams under the same load say what any Delta
        # pipeline pays on this machine, without validation, quarantine or exact gold.
        for key, interval, pipeline in LATENCY_RUNS:
            if key != "latency" and args.quick:
                continue
            step(f"{key}: {pipeline} streaming, a 1,000-event file a second for {stream_seconds}s")
            shutil.rmtree(work / key, ignore_errors=True)
            (work / key).mkdir(parents=True)
            results[key] = measure_latency(
                work / key,
                stream_seconds,
                interval=interval,
                faults=BENCH_FAULTS,
                pipeline=pipeline,
            )
    if "recovery" not in skip:
        step(f"recovery: SIGKILL after {steady_seconds}s of steady streaming")
        shutil.rmtree(work / "recovery", ignore_errors=True)
        (work / "recovery").mkdir(parents=True)
        results["recovery"] = measure_recovery(
            work / "recovery", steady_seconds, faults=BENCH_FAULTS
        )
    if "small_files" not in skip:
        for mode in ("on", "off"):
            step(f"small files: {small_batches} micro-batches, compaction {mode}")
            run = run_child(
                ["benchmarks/small_files.py", "--mode", mode, "--batches", str(small_batches)],
                logs / f"small_files_{mode}.log",
                timeout,
            )
            (args.out / f"small_files_{mode}.json").parent.mkdir(parents=True, exist_ok=True)
            (args.out / f"small_files_{mode}.json").write_text(json.dumps(run.result, indent=2))
    # The file counts do not depend on the machine's load, so a run that skips this part (it
    # takes 200 micro-batches per mode) reports the latest counts from the results folder.
    earlier = {mode: args.out / f"small_files_{mode}.json" for mode in ("on", "off")}
    if all(path.exists() for path in earlier.values()):
        results["small_files"] = {
            mode: json.loads(path.read_text()) for mode, path in earlier.items()
        }
    if "scaling" not in skip:
        points = []
        for size in sizes:
            if size == events:
                wall = backfill["wall_s"]
            else:
                step(f"scaling: backfill of {size:,} events")
                lake = work / f"ours-{size}"  # work/ours stays the backfill's lake
                wall = _child("ours.py", _dataset(work, size), lake, logs, timeout)["wall_s"]
            points.append({"events": size, "wall_s": wall})
        results["scaling"] = {
            "points": points,
            "exponent": round(_scaling_exponent([(p["events"], p["wall_s"]) for p in points]), 3),
        }

    if "growth" not in skip:
        step(f"growth: --stream fed 2,000 events a second for {growth_seconds}s")
        shutil.rmtree(work / "growth", ignore_errors=True)
        (work / "growth").mkdir(parents=True)
        results["growth"] = measure_growth(work / "growth", growth_seconds, faults=BENCH_FAULTS)

    # Parts run as scripts of their own, whose results are kept in the results folder: like the
    # file counts, a skipped part reports the latest measurement there.
    recorded_parts = [
        (
            "deliveries",
            "small deliveries: medallion run against a batch-ceiling process, whole processes",
            # The backfill's lake is the history: one process fewer than building one.
            [
                *("--history", str(events), "--delivery", "500", "--repeat", "1"),
                *("--history-landing", landing, "--history-lake", str(work / "ours")),
            ],
        ),
        (
            "incremental",
            "incremental: one delivery on a small and on a large history",
            ["--small", "2000", "--large", "20000"],
        ),
        (
            "refresh",
            "refresh: a delivery on a large lake, medallion run against Declarative Pipelines",
            ["--history", "20000", "--delivery", "1000", "--repeat", "1"],
        ),
        (
            "tagged_writes",
            "tagged writes: Delta appends untagged, with txnAppId/txnVersion, and with a batch tag",
            ["--writes", "1"],
        ),
    ]
    for part, description, quick_args in recorded_parts:
        recorded = args.out / f"{part}.json"
        if part not in skip:
            step(description)
            run = run_child(
                [
                    f"benchmarks/{part}.py",
                    "--workdir",
                    str(work / "incremental"),
                    *(quick_args if args.quick else []),
                ],
                logs / f"{part}.log",
                timeout,
            )
            recorded.write_text(json.dumps(run.result, indent=2))
        if recorded.exists():
            results[part] = json.loads(recorded.read_text())
    previous = args.out / "latest.json"
    if previous.exists():
        _carry_skipped(results, skip, json.loads(previous.read_text()))
    results["checks"] = _checks(results)
    results["bench_s"] = round(time.monotonic() - began, 1)
    text = json.dumps(results, indent=2, default=str)
    stamp = results["started_at"].replace(":", "").replace("-", "")
    (args.out / f"{stamp}.json").write_text(text + "\n")
    (args.out / "latest.json").write_text(text + "\n")
    _write_report(results, args.out)
    step(f"done; results in {args.out}")


def _write_report(results: dict, out: Path) -> None:
    table = markdown(results)
    (out / "latest.md").write_text(table)
    chart(results, out / "latest.png")
    print(table)


if __name__ == "__main__":
    main()
