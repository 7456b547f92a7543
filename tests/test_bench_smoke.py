"""The benchmark still runs: a tiny ``make bench QUICK=1`` with its backfill comparisons.

It runs benchmarks/bench.py as ``make bench`` does, with medallion and the batch ceiling on
1,000 events, the small deliveries part (on the backfill's lake, one JVM fewer than building a
history) and the tagged writes part (one write of each kind after the warm-up); the other peers
and the streaming, recovery, small-file, scaling, growth, incremental and refresh parts each
start more JVMs, so they are left to ``make bench``. It checks the outputs: the results JSON,
the Markdown table, the chart and the target checks. The gold comparison of the peers is
checked without Spark.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from bench import _backfill_panel, _carry_skipped, _gold_diff  # noqa: E402
from measure import gold_batches, visible_times  # noqa: E402


def test_a_peer_gold_that_differs_is_reported_total_by_total():
    ours = {"rows": 10, "views": 7, "purchases": 2, "revenue": "12.5000"}
    assert _gold_diff(ours, dict(ours)) is None
    wrong = {**ours, "rows": 11, "purchases": 4, "revenue": "10.0000"}
    assert _gold_diff(ours, wrong) == {"rows": 1, "purchases": 2, "revenue": "-2.5000"}
    assert _gold_diff(ours, None) == {"error": "no gold totals"}


def test_the_chart_stacks_layers_draws_both_targets_and_marks_a_peer_with_wrong_gold():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layers = {"bronze": 5.0, "silver": 3.0, "gold": 2.0}
    results = {
        "events": 1000,
        "backfill": {"wall_s": 12.0, "layers_s": layers},
        "peers": {
            "batch_ceiling": {"wall_s": 8.0, "layers_s": {"bronze": 8.0}},
            "tutorial": {"wall_s": 9.0, "layers_s": layers, "gold_diff": {"rows": 1}},
            "sdp": {"wall_s": 20.0, "pipeline_s": 18.0, "gold_diff": None},
        },
    }
    figure, axis = plt.subplots()
    _backfill_panel(axis, results)
    labels = {line.get_label(): line for line in axis.get_lines()}
    assert labels["target: 2.5x the batch ceiling"].get_ydata()[0] == 20.0
    assert labels["target: 1x SDP's throughput"].get_ydata()[0] == 18.0
    bars = [
        (round(b.get_x() + b.get_width() / 2), b.get_y(), b.get_height(), b.get_hatch())
        for b in axis.patches
    ]
    # medallion: bronze, silver, gold stacked, then the rest of its 12 s.
    assert [(y, h) for x, y, h, _ in bars if x == 0] == [
        (0, 5.0),
        (5.0, 3.0),
        (8.0, 2.0),
        (10.0, 2.0),
    ]
    assert {hatch for x, _, _, hatch in bars if x == 2} == {"//"}  # the tutorial's gold differs
    assert {hatch for x, _, _, hatch in bars if x in (0, 1, 3)} == {None}
    assert [t.get_text() for t in axis.texts] == ["gold differs"]
    plt.close(figure)


def test_a_partial_run_quotes_the_parts_it_skipped_with_when_they_were_measured():
    previous = {
        "started_at": "2026-12-05T10:00:00Z",
        "quick": False,
        "events": 1000,
        "scaling": {"exponent": 0.33},
        "growth": {"batches": 66},
        "latency": {"old": True},
        "refresh": {"ratio": 1.8},
        "incremental": {"ratio": 1.1},
        "carried_from": {"growth": "2026-11-25T15:19:55Z", "incremental": "2026-11-25T15:19:55Z"},
    }
    results = {
        "started_at": "2026-12-06T06:23:56Z",
        "quick": False,
        "events": 1000,
        "latency": {"new": True},  # measured in this run
        "refresh": {"ratio": 1.95},  # measured in this run, written to its file
        "incremental": {"ratio": 1.1},  # skipped, read from its file
    }
    _carry_skipped(results, {"scaling", "growth", "incremental"}, previous)
    assert results["latency"] == {"new": True} and results["refresh"] == {"ratio": 1.95}
    assert results["scaling"] == {"exponent": 0.33} and results["growth"] == {"batches": 66}
    assert results["carried_from"] == {
        "scaling": "2026-12-05T10:00:00Z",
        "growth": "2026-11-25T15:19:55Z",
        "incremental": "2026-11-25T15:19:55Z",
    }
    # A run of another size quotes nothing.
    other = {"started_at": "x", "quick": True, "events": 1000}
    _carry_skipped(other, {"scaling"}, previous)
    assert "scaling" not in other and "carried_from" not in other


@pytest.mark.slow
def test_quick_bench_writes_results_table_chart_and_checks(tmp_path):
    out = tmp_path / "results"
    command = [
        sys.executable,
        "benchmarks/bench.py",
        "--quick",
        "--events",
        "1000",
        "--skip",
        "peers,latency,recovery,small_files,scaling,growth,incremental,refresh",
        "--out",
        str(out),
        "--workdir",
        str(tmp_path / "work"),
    ]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    results = json.loads((out / "latest.json").read_text())
    assert len(list(out.glob("2*.json"))) == 1
    ours = results["backfill"]
    ceiling = results["peers"]["batch_ceiling"]
    # The same files: the ceiling's bronze is ours, row for row.
    assert ceiling["bronze_rows"] == ours["bronze_rows"] > 1000
    assert ours["silver_rows"] + ours["quarantined"] < ours["bronze_rows"]  # duplicates dropped
    assert set(ours["layers_s"]) == {"bronze", "silver", "gold"}
    assert ours["peak_total_rss_mb"] > ours["peak_python_rss_mb"] > 0
    assert ours["peak_jvm_heap_used_mb"] > 0
    targets = {check["target"] for check in results["checks"]}
    assert any("batch ceiling" in t for t in targets) and any("RSS" in t for t in targets)
    table = (out / "latest.md").read_text()
    assert "| medallion |" in table and "| batch_ceiling |" in table
    assert (out / "latest.png").stat().st_size > 10_000
    deliveries = results["deliveries"]
    assert deliveries["medallion_median_s"] > 0 and deliveries["ratio"] > 0
    assert deliveries["history_events"] == 1000  # on the backfill's lake (--quick)
    # A tagged write costs Delta a rebuild of the table's state: more Spark jobs than untagged.
    tagged = results["tagged_writes"]
    assert tagged["tagged_jobs_per_write"] > tagged["untagged_jobs_per_write"] >= 1
    # medallion's batch tag costs no more jobs than an untagged append, replay check included.
    assert tagged["batch_tag_jobs_per_write"] == tagged["untagged_jobs_per_write"]
    assert tagged["batch_tag_replay_jobs_per_write"] == tagged["untagged_jobs_per_write"]
    assert "Tagged writes:" in table
    # The streaming parts time each landed file to the gold commit of the batch that took it
    # into bronze, found by the batch's tag (measure.py): every file bronze holds has one.
    work = tmp_path / "work"
    landed = {path.name: 0.0 for path in (work / "data-1000" / "landing" / "events").iterdir()}
    visible = visible_times(str(work / "ours"), landed)
    assert visible["bronze"] and set(visible["gold"]) == set(visible["bronze"])
    assert set(visible["silver"]) <= set(visible["bronze"])
    assert gold_batches(str(work / "ours")) >= 1


def test_the_tutorial_peers_files_are_timed_to_the_gold_batch_that_read_their_silver_version(
    tmp_path,
):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from measure import tutorial_visible_times

    def commit(layer: str, version: int, at_s: float, files=(), batch=None) -> None:
        log = tmp_path / layer / "events" / "_delta_log"
        log.mkdir(parents=True, exist_ok=True)
        actions = [{"commitInfo": {"timestamp": int(at_s * 1000)}}]
        for i, sources in enumerate(files):
            name = f"part-{version}-{i}.parquet"
            table = pa.table({"_source_file": [f"file:/landing/events/{s}" for s in sources]})
            pq.write_table(table, log.parent / name)
            actions.append({"add": {"path": name, "dataChange": True}})
        if batch is not None:
            actions.append({"txn": {"appId": "gold-query", "version": batch}})
        (log / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in actions))

    def offsets(batch: int, silver_version: int, index: int) -> None:
        folder = tmp_path / "_checkpoints" / "gold" / "offsets"
        folder.mkdir(parents=True, exist_ok=True)
        offset = {"reservoirVersion": silver_version, "index": index}
        (folder / str(batch)).write_text(f"v1\n{{}}\n{json.dumps(offset)}\n")

    commit("bronze", 0, 101.0, [["a.json"]])
    commit("bronze", 1, 103.0, [["b.json", "c.json"]])
    commit("silver", 0, 102.0, [["a.json"]])
    commit("silver", 1, 105.0, [["b.json"], ["c.json"]])
    commit("gold", 0, 104.0, [["a.json"]], batch=0)
    offsets(0, 1, -1)  # read silver's version 0 whole, nothing of version 1
    commit("gold", 1, 108.0, [["a.json"]], batch=1)
    offsets(1, 1, 1)  # read version 1 too
    landed = {"a.json": 100.0, "b.json": 102.0, "c.json": 102.5, "d.json": 103.0}
    visible = tutorial_visible_times(str(tmp_path), landed)
    assert visible["bronze"] == {"a.json": 1.0, "b.json": 1.0, "c.json": 0.5}
    assert visible["silver"] == {"a.json": 2.0, "b.json": 3.0, "c.json": 2.5}
    assert visible["gold"] == {"a.json": 4.0, "b.json": 6.0, "c.json": 5.5}
