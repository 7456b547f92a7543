"""Repeated SIGKILLs of a fed `--stream` run, a SIGTERM to its process group, then an
available-now run: the lake equals an uninterrupted run and an independent plain-Python
computation.

CI size by default; RELIABILITY_KILLS and RELIABILITY_EVENTS scale it up for a soak.
"""

from __future__ import annotations

import os
import queue
import random
import shutil
import signal
import threading
import time
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest
from history_oracle import expected_revenue_at_purchase, landed_changes
from lake_checks import (
    assert_change_feed_audited,
    assert_customers_match,
    assert_lake_matches,
    daily_revenue,
    lake_snapshot,
    rows_of,
)
from oracle import expected_customers, expected_from
from processes import batch_in_flight, kill_group, start_medallion, wait_until

from medallion.config import Config
from medallion.pipelines.retail.flows import FLOWS
from medallion.pipelines.retail.generator import generate
from medallion.streams.fusion import is_member
from medallion.streams.runner import run_available_now

pytestmark = pytest.mark.slow  # left out of make test-fast (docs/testing.md)

# By default each early moment, pause point and mid-batch target once (10 kills); more kills
# add random moments between them.
KILLS = int(os.environ.get("RELIABILITY_KILLS", "10"))
EVENTS = int(os.environ.get("RELIABILITY_EVENTS", "1500"))
SEED = int(os.environ.get("RELIABILITY_SEED", "2026"))

# Tables whose content depends on where micro-batch boundaries fall, so they are checked by
# their invariants instead of equality with an uninterrupted run: the audit trail (one change
# row per applied change). Revenue by country does not: a purchase takes the country its
# customer had at the time, and it is checked against the oracle.
# The first kills land before the lake exists: as soon as the first run starts creating its
# tables, then at a random moment of the next run's start-up (session, tables, registration).
EARLY_MOMENTS = ("table creation", "start-up")
# Then a stream killed mid-batch (the events through every layer, MERGEs, a stream-static
# join), and a run held between two writes of one foreachBatch (medallion/faults.py) and
# killed there, with random moments in between. bronze_events carries each batch of events
# through silver and gold (streams/fusion.py): its writes are the pause points.
MID_BATCH_TARGETS = (
    "bronze_events",
    "silver_customers",
    "gold_daily_revenue_by_country",
)
PAUSE_POINTS = (
    "bronze_events:appended",  # bronze appended, nothing of silver or gold yet
    "silver_events:quarantined",  # quarantine appended, silver not appended yet
    "silver_events:appended",  # silver appended, gold not merged yet
    "silver_customers:customers_merged",  # customers merged, tombstones not yet
    "gold_hourly:metrics_merged",  # gold's sums added, the users they counted not appended yet
)

BATCHING_DEPENDENT = {"gold/customer_changes"}


class Feeder(threading.Thread):
    """Moves staged files into the landing folder one by one, as an upstream system would,
    while the stream runs: :meth:`deliver` hands it the next files, :meth:`finish` waits."""

    def __init__(self, pause: float) -> None:
        super().__init__(daemon=True)
        self.pause = pause
        self.files: queue.Queue[tuple[Path, Path] | None] = queue.Queue()

    def deliver(self, files: list[tuple[Path, Path]]) -> None:
        for item in files:
            self.files.put(item)

    def finish(self, timeout: float) -> None:
        self.files.put(None)
        self.join(timeout)

    def run(self) -> None:
        while (item := self.files.get()) is not None:
            source, target = item
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, target.parent / f".{target.name}.tmp")
            os.replace(target.parent / f".{target.name}.tmp", target)
            time.sleep(self.pause)


def _schedule(kills: int) -> list[str]:
    """When each kill lands: an early moment, ``random``, a stream to kill mid-batch, or a
    pause point. Every target comes once (with a random moment between targets while kills
    last) before any comes again."""
    moments = list(EARLY_MOMENTS[:kills])
    targets: list[str] = []
    randoms = kills - len(moments) - len(PAUSE_POINTS) - len(MID_BATCH_TARGETS)
    while len(moments) < kills:
        if not targets:
            targets = [*PAUSE_POINTS, *MID_BATCH_TARGETS]
        if randoms > 0 and moments[-1] != "random":
            moments.append("random")
            randoms -= 1
        else:
            moments.append(targets.pop(0))
    return moments


def _deliveries(staging: Path, landing: Path, schedule: list[str]) -> list[list[tuple[Path, Path]]]:
    """The generated files as one delivery per run, so every run has new input to work on.

    Event files go round-robin to every run. The (up to four) customer files go to the runs
    held between the customers and tombstones MERGEs, or killed while silver_customers or
    bronze_events have a batch in flight, so each has work when its kill comes.
    """
    kills = len(schedule)
    files = max(20, EVENTS // 150)  # every run gets two event files, or more
    generate(str(staging), events=EVENTS, customers=max(75, EVENTS // 20), files=files, seed=SEED)
    deliveries: list[list[tuple[Path, Path]]] = [[] for _ in range(kills)]
    events = sorted(staging.glob("events/*.json"))
    random.Random(SEED).shuffle(events)
    for n, path in enumerate(events):
        deliveries[n % kills].append((path, landing / "events" / path.name))
    order = ("silver_customers:customers_merged", "silver_customers", "bronze_events")
    targeted = [schedule.index(t) for t in order if t in schedule] or [0]
    for n, path in enumerate(sorted(staging.glob("customers/*.json"))):
        deliveries[targeted[n % len(targeted)]].append((path, landing / "customers" / path.name))
    return deliveries


def _created_tables(lake: Path) -> int:
    """How many tables have their first commit."""
    return len(list(lake.glob("*/*/_delta_log/00000000000000000000.json")))


def _revenue_per_day(spark, config: Config) -> dict:
    totals: dict = defaultdict(lambda: [Decimal(0), 0])
    for (day, _country), row in daily_revenue(spark, config).items():
        totals[day][0] += row["revenue"]
        totals[day][1] += row["purchases"]
    return {day: tuple(v) for day, v in totals.items()}


def _audit_replays_to_silver(spark, config: Config) -> None:
    latest: dict[str, tuple] = {}
    audit = rows_of(config, "gold/customer_changes")
    for row in sorted(audit, key=lambda r: (r._commit_version, r._change_type != "delete")):
        if row._change_type in ("insert", "update_postimage"):
            latest[row.customer_id] = (row.country, row.sequence_num)
        elif row._change_type == "delete":
            latest.pop(row.customer_id, None)
    silver = rows_of(config, "silver/customers")
    assert latest == {r.customer_id: (r.country, r.sequence_num) for r in silver}


@pytest.mark.timeout(3600)
def test_repeated_sigkill_then_sigterm_then_available_now_converges(spark, dirs, tmp_path):
    landing, lake = dirs
    config = Config(landing=str(landing), lake=str(lake))
    log = tmp_path / "final.log"
    rng = random.Random(SEED)
    schedule = _schedule(KILLS)
    deliveries = _deliveries(tmp_path / "staging", landing, schedule)
    feeder = Feeder(pause=0.3)
    feeder.start()
    args = (
        "run",
        "--landing",
        str(landing),
        "--lake",
        str(lake),
        "--stream",
        "--interval",
        "0.5",
        "--max-files-per-trigger",
        "2",
    )
    checkpoints = {flow.name: lake / "_checkpoints" / flow.name for flow in FLOWS}
    assert set(MID_BATCH_TARGETS) <= {f.name for f in FLOWS if not is_member(f)}

    kill_log = []
    process = None
    pauses = tmp_path / "pauses"
    pauses.mkdir()
    try:
        for kill, when in enumerate(schedule):
            run_log = tmp_path / f"run-{kill}.log"
            env = {"MEDALLION_PAUSE_AT": when, "MEDALLION_PAUSE_DIR": str(pauses)}
            process = start_medallion(*args, log_path=run_log, env=env)
            started = time.monotonic()

            def alive_and(predicate, process=process):
                return lambda: predicate() or process.poll() is not None

            feeder.deliver(deliveries[kill])
            if when == "table creation":  # the first sign of a table on disk
                wait_until(alive_and(lambda: any(lake.glob("*/*/_delta_log"))), 300, 0.002)
                moment = f"table creation ({_created_tables(lake)} created)"
                assert "starting bronze_events" not in run_log.read_text(), "too late"
            elif when == "start-up":  # anywhere in the session start, creation, registration
                time.sleep(rng.uniform(0.2, 12.0))
                moment = "start-up"
            else:
                assert wait_until(
                    alive_and(lambda log=run_log: "starting bronze_events" in log.read_text()), 120
                )
                if when == "random":
                    time.sleep(rng.uniform(0.5, 6.0))
                    moment = "random"
                elif when in PAUSE_POINTS:  # held between two writes of one batch
                    found = wait_until(alive_and(lambda p=pauses / when: p.exists()), 120, 0.05)
                    moment = f"paused at {when}" if found else f"timeout {when}"
                else:  # while the stream has a batch planned but not committed
                    found = wait_until(
                        alive_and(lambda t=when: batch_in_flight(checkpoints[t])), 90, 0.02
                    )
                    moment = f"mid-batch {when}" if found else f"timeout {when}"
            assert process.poll() is None, run_log.read_text(errors="replace")[-3000:]
            kill_group(process)
            assert process.returncode == -signal.SIGKILL
            kill_log.append((kill, moment, round(time.monotonic() - started, 1)))
        feeder.finish(timeout=600)
        print("kills:", kill_log)
        # Every targeted kill landed while its stream had a batch in flight, or at its point.
        missed = [entry for entry in kill_log if entry[1].startswith("timeout")]
        assert not missed, kill_log

        process = start_medallion(*args, log_path=log)
        assert wait_until(
            lambda: "starting gold_daily_revenue_by_country" in log.read_text(errors="replace"),
            120,
        )
        time.sleep(5)
        # SIGTERM to the whole process group, as systemd's KillMode=control-group sends it:
        # the JVM ignores it, the driver stops its queries after their batches and exits 0.
        os.killpg(process.pid, signal.SIGTERM)
        stopped_at = time.monotonic()
        # The run waits at most Config.stop_timeout_seconds (60 s) for batches in flight.
        assert process.wait(timeout=180) == 0, log.read_text(errors="replace")[-3000:]
        print(f"SIGTERM to exit: {time.monotonic() - stopped_at:.1f}s")
    finally:
        if process is not None and process.poll() is None:
            kill_group(process)  # a failure leaves no JVM running
    text = log.read_text(errors="replace")
    assert "received SIGTERM: stopping after the batches in flight" in text
    assert "Traceback" not in text and "ConnectionRefusedError" not in text
    assert not list((lake / "_checkpoints" / "_locks").glob("*.lock")), "locks left behind"

    # An available-now run drains what is left (in this process; the CLI runs the same code).
    run_available_now(spark, config)

    # 1. The independent plain-Python computation.
    events, customers = expected_from(landing), expected_customers(landing)
    assert_lake_matches(spark, config, events)
    assert_customers_match(spark, config, customers)
    assert_change_feed_audited(spark, config)
    _audit_replays_to_silver(spark, config)
    revenue = expected_revenue_at_purchase(events.silver, landed_changes(landing))
    assert daily_revenue(spark, config) == revenue

    # 2. An uninterrupted run over the same input.
    calm = Config(landing=str(landing), lake=str(tmp_path / "calm-lake"))
    run_available_now(spark, calm)
    crashed, uninterrupted = lake_snapshot(spark, config), lake_snapshot(spark, calm)
    for key in crashed:
        if key not in BATCHING_DEPENDENT:
            assert crashed[key] == uninterrupted[key], key
    assert _revenue_per_day(spark, config) == _revenue_per_day(spark, calm)
    purchases = sum(1 for e in events.silver.values() if e["event_type"] == "purchase")
    assert sum(n for _, n in _revenue_per_day(spark, config).values()) == purchases
    assert len(kill_log) == KILLS
