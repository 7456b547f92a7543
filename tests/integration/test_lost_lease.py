"""A run that loses its lock stops writing before the lease can lapse (medallion/locks.py): a
``foreachBatch`` batch refuses to write, and a continuous run stops its queries at once and
fails with one line naming the run that took its stream."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from processes import committed_batches, wait_until
from stream_thread import StreamInThread

from medallion import locks as lease
from medallion.config import Config
from medallion.locks import LeaseLost, StreamLocks, lock_holders
from medallion.pipelines.retail.generator import generate
from medallion.streams.sinks import Trigger, start_foreach_batch

pytestmark = pytest.mark.slow  # left out of make test-fast (docs/testing.md)

TAKER = {
    "host": "other-host",
    "pid": 4242,
    "started_at": "2026-11-23T10:00:00Z",
    "command": "medallion run (stream)",
    "run_id": "taker",
}


def _take_over(path: str) -> None:
    """Another run's lock in place of ``path``, in one step (as a takeover leaves it)."""
    aside = f"{path}.swap"
    Path(aside).write_text(json.dumps(TAKER))
    os.replace(aside, path)


@pytest.fixture
def short_lease(monkeypatch) -> None:
    """Heartbeats every 0.2 s and a lease of 10 s (a holder stops writing after 9.6 s)."""
    monkeypatch.setattr(lease, "HEARTBEAT_SECONDS", 0.2)
    monkeypatch.setattr(lease, "LEASE_SECONDS", 10.0)


def test_a_batch_of_a_stream_whose_lease_is_lost_writes_nothing(spark, tmp_path, short_lease):
    checkpoints = str(tmp_path / "_checkpoints")
    checkpoint = f"{checkpoints}/lease_probe"
    landing = tmp_path / "in"
    landing.mkdir()
    (landing / "a.txt").write_text("a\n")
    batches: list[int] = []

    def run_once() -> None:
        lines = spark.readStream.text(str(landing))
        trigger = Trigger(available_now=True)
        start_foreach_batch(
            lines, lambda _, batch_id: batches.append(batch_id), checkpoint, trigger, "lease_probe"
        ).awaitTermination(300)

    locks = StreamLocks(checkpoints, ["lease_probe"], "medallion run").acquire()
    try:
        run_once()
        assert batches == [0]
        _take_over(locks.path("lease_probe"))
        assert locks.lost.wait(lease.LEASE_SECONDS)
        (landing / "b.txt").write_text("b\n")
        with pytest.raises(Exception, match="LeaseLost") as refused:
            run_once()
        assert "lease_probe.lock was taken by host other-host" in str(refused.value)
        assert batches == [0], "a batch wrote after the lease was lost"
    finally:
        locks.release()


def test_a_continuous_run_whose_lock_is_taken_over_stops_at_once(spark, dirs, short_lease):
    landing, lake = dirs
    generate(str(landing), events=60, customers=10, files=2, seed=17)  # a small stream
    config = Config(landing=str(landing), lake=str(lake), trigger_interval_seconds=1)
    locks = lake / "_checkpoints" / "_locks"
    stream = StreamInThread(spark, config).start()
    try:
        bronze = lake / "_checkpoints" / "bronze_events"
        assert wait_until(lambda: committed_batches(bronze) >= 1 or not stream.running, 300)
        assert stream.running
        held = sorted(p.name for p in locks.glob("*.lock"))
        taken = time.monotonic()
        _take_over(str(locks / "bronze_events.lock"))
        assert wait_until(lambda: not stream.running, 60)
        stopped_in = time.monotonic() - taken
    finally:
        stream.stop_event.set()
    with pytest.raises(LeaseLost) as lost:
        stream.stop()
    assert stopped_in < lease.safe_seconds(), f"stopped {stopped_in:.1f} s after the takeover"
    message = str(lost.value)
    assert "\n" not in message
    assert "medallion run (stream) stopped writing 'bronze_events'" in message
    assert "bronze_events.lock was taken by host other-host, pid 4242" in message
    assert not spark.streams.active
    # The taken lock stays the taker's; the others this run held are given up.
    assert len(held) > 1
    assert lock_holders(config.checkpoints_folder, ["bronze_events"])["bronze_events"].run_id == (
        "taker"
    )
    assert sorted(p.name for p in locks.glob("*.lock")) == ["bronze_events.lock"]
