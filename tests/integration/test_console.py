"""What a person sees: on a machine without the jars, one line says what is downloaded; then
one line per stream and the summary, and nothing else. The JVM's output is in a log file."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
from processes import MEDALLION, kill_group, run_medallion, start_medallion, wait_until

from medallion.cli import main
from medallion.pipelines import pipelines
from medallion.pipelines.iot import generator as iot

pytestmark = pytest.mark.slow  # left out of make test-fast (docs/testing.md)

STEP = re.compile(r"(\w+) +OK +(?:[\d,]+ rows? +\d+ batch(?:es)? +[\d.]+ s|nothing new)")


def test_a_run_prints_a_download_line_once_a_line_per_stream_and_the_summary(
    spark, tmp_path, capsys, monkeypatch
):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    assert (
        run_medallion(
            "generate", "--landing", str(landing), "--pipeline", "iot", "--records", "40"
        ).returncode
        == 0
    )
    env = {
        "MEDALLION_JAR_CACHE": str(tmp_path / "jars"),
        "MEDALLION_LOG_DIR": str(tmp_path / "logs"),
    }
    run = ("run", "--landing", str(landing), "--lake", str(lake), "--pipeline", "iot")
    flows = [f.name for f in pipelines(["iot"])[0].flows]

    first = run_medallion(*run, env=env)

    assert first.returncode == 0, first.stderr
    download, *steps = first.stderr.splitlines()
    assert download.startswith("medallion: first run on this machine: fetching the jars of")
    assert "MB) from Maven Central" in download
    assert sorted(STEP.fullmatch(line).group(1) for line in steps) == sorted(flows), steps
    table = first.stdout.splitlines()
    assert table[0].split() == [
        "table",
        "rows",
        "in",
        "rows",
        "out",
        "quarantined",
        "total",
        "rows",
    ]
    assert len(table) == 2 + len(pipelines(["iot"])[0].tables)
    # Ivy's resolution and Spark's warnings went to the JVM's log, not to the console.
    (log,) = (tmp_path / "logs").glob("spark-*.log")
    assert ":: resolving dependencies ::" in log.read_text()
    assert ":: resolving" not in first.stdout + first.stderr

    # A second run finds nothing new, and says so stream by stream (in this process: its
    # session; the shell below is the second process on this jar cache).
    capsys.readouterr()
    assert main(list(run)) == 0
    lines = capsys.readouterr().err.splitlines()
    assert [STEP.fullmatch(line).group(1) for line in lines if "nothing new" in line]
    assert all(STEP.fullmatch(line) for line in lines), lines

    # The same lake through the JSON of `show` and `status`.
    assert main(["show", "--lake", str(lake), "--pipeline", "iot", "--output", "json"]) == 0
    shown = {t["table"]: t for t in json.loads(capsys.readouterr().out)}
    summary = {line.split()[0]: int(line.split()[-1].replace(",", "")) for line in table[2:]}
    assert {key: t["rows"] for key, t in shown.items()} == {
        key: rows for key, rows in summary.items() if key.startswith("gold/")
    }
    minutes = [r["minute_start"] for r in shown["gold/device_minute_metrics"]["first_rows"]]
    assert minutes == sorted(minutes)  # gold by time first
    status = ["status", "--lake", str(lake), "--landing", str(landing), "--pipeline", "iot"]
    assert main([*status, "--output", "json", "--max-lag", "0"]) == 0
    streams = json.loads(capsys.readouterr().out)["streams"]
    assert {s["stream"] for s in streams} == set(flows)
    # A file lands: the bronze stream is one file behind, which --max-lag 0 reports.
    assert (
        run_medallion(
            "generate",
            "--landing",
            str(landing),
            "--pipeline",
            "iot",
            "--records",
            "5",
            "--files",
            "1",
            "--seed",
            "9",
        ).returncode
        == 0
    )
    assert main([*status, "--max-lag", "0"]) == 1
    assert "behind: bronze_device_readings: 1 landed files unread" in capsys.readouterr().err
    # Without --landing the folder is the one the checkpoint records: the same file unread.
    monkeypatch.delenv("MEDALLION_LANDING", raising=False)
    bare = ["status", "--lake", str(lake), "--pipeline", "iot", "--max-lag", "0"]
    assert main([*bare, "--output", "json"]) == 1
    out, err = capsys.readouterr()
    lag = {s["stream"]: s["lag"] for s in json.loads(out)["streams"]}["bronze_device_readings"]
    assert (lag["pending_files"], lag["folder"]) == (1, str(landing / "device_readings"))
    assert "behind: bronze_device_readings: 1 landed files unread" in err
    # A landing folder that is gone: that lag is unknown, which --max-lag will not pass as 0.
    landing.rename(tmp_path / "moved")
    assert main([*bare[:-1], "5"]) == 3
    out, err = capsys.readouterr()
    assert "unknown: bronze_device_readings: lag unknown: " in err
    assert "where its checkpoint says it read, is gone" in err and "unknown:" in out
    assert main(bare[:-2]) == 0  # without --max-lag, status only shows it
    (tmp_path / "moved").rename(landing)

    # `medallion shell`: IPython with `spark` and the lake's tables by name.
    shell = subprocess.run(
        [MEDALLION, "shell", "--lake", str(lake)],
        input='print("rows:", spark.table("medallion.gold_device_status").count())\n',
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **env},
    )
    assert shell.returncode == 0, shell.stderr
    # A second process on the same jar cache downloads nothing, and logs the JVM apart.
    assert "fetching the jars" not in shell.stdout + shell.stderr
    assert len(list((tmp_path / "logs").glob("spark-*.log"))) == 2
    assert "medallion.gold_device_status" in shell.stdout.splitlines()[0]
    assert f"rows: {shown['gold/device_status']['rows']}" in shell.stdout


def test_ctrl_c_during_an_available_now_run_exits_130_with_one_line(tmp_path):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    iot.generate(str(landing), records=3000, files=6, seed=4)
    log = tmp_path / "run.log"
    # One file a batch: the run is mid-way when Ctrl-C comes.
    run = start_medallion(
        "run", "--landing", str(landing), "--lake", str(lake), "--pipeline", "iot",
        "--max-files-per-trigger", "1", log_path=log,
    )  # fmt: skip
    try:
        commits = lake / "_checkpoints" / "bronze_device_readings" / "commits"
        assert wait_until(lambda: (commits / "0").exists(), 300), log.read_text()[-3000:]
        os.killpg(run.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole group
        assert run.wait(timeout=120) == 130, log.read_text()[-3000:]
    finally:
        if run.poll() is None:
            kill_group(run)
    text = log.read_text()
    assert "Traceback" not in text, text[-3000:]
    assert (
        text.splitlines()[-1] == "medallion run: interrupted; a rerun resumes from the checkpoints"
    )


def test_a_failed_run_says_so_in_one_line_and_keeps_the_tracebacks_for_the_log_and_v(tmp_path):
    """A foreachBatch function that raises (an expectation set to fail) makes py4j log the
    Python traceback and PySpark the JVM's: the console shows neither, only the CLI's line
    naming the stream, its checkpoint, the cause and the JVM's log, which keeps them; ``-v``
    shows them (issue 66)."""
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    (landing / "events").mkdir(parents=True)
    good = {
        "event_type": "purchase",
        "user_id": "u1",
        "product_id": "p1",
        "event_timestamp": "2026-11-01T10:00:00Z",
    }
    rows = [{"event_id": f"e{n}", **good, "revenue": r} for n, r in enumerate((5, -5, 7))]
    (landing / "events" / "a.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = (
        "run", "--landing", str(landing), "--lake", str(lake), "--pipeline", "retail",
        "--set", "expect.events.revenue_not_negative=fail",
    )  # fmt: skip
    env = {"MEDALLION_LOG_DIR": str(tmp_path / "logs")}

    failed = run_medallion(*run, env=env)
    assert failed.returncode == 1, failed.stderr[-3000:]
    assert "Traceback" not in failed.stderr and "py4j" not in failed.stderr, failed.stderr
    # One line for the failure; the others are the steps of the streams that finished.
    (line,) = [s for s in failed.stderr.splitlines() if not STEP.match(s)]
    assert line.startswith("medallion run: failed: stream 'bronze_events'"), line
    assert f"checkpoint {lake / '_checkpoints' / 'bronze_events'}:" in line
    assert "expectation events.revenue_not_negative failed: 1 of 3 rows" in line
    log = re.search(r"\(the JVM's log: (\S+)\)$", line)
    assert log is not None and log.group(1).startswith(str(tmp_path / "logs")), line
    kept = Path(log.group(1)).read_text(encoding="utf-8")
    assert "ERROR py4j.clientserver" in kept and "medallion run failed" in kept
    assert "Traceback" in kept and "ExpectationFailedError" in kept

    verbose = run_medallion(*run, "-v", env=env)
    assert verbose.returncode == 1, verbose.stderr[-3000:]
    assert "Traceback" in verbose.stderr and "ExpectationFailedError" in verbose.stderr
    assert verbose.stderr.splitlines()[-1].startswith(
        "medallion run: failed: stream 'bronze_events'"
    )
