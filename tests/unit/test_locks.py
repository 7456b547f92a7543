"""Stream locks without Spark: refusal, release, safe takeover of stale locks (atomic, raced by
processes), and a holder that stops writing once its lease is lost."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from medallion import locks as lease
from medallion.config import Config
from medallion.locks import (
    LEASE_SECONDS,
    LeaseLost,
    LockHeld,
    StreamLocks,
    check_lease,
    lock_holders,
    stream_locks,
)
from medallion.streams.pausing import pause_asked, pause_request, paused_for


@pytest.fixture
def checkpoints(tmp_path) -> str:
    """A local lake's checkpoints folder (``Config.checkpoints_folder``)."""
    return Config(landing=str(tmp_path / "landing"), lake=str(tmp_path / "lake")).checkpoints_folder


def _plant(checkpoints: str, stream: str, **holder: object) -> str:
    folder = os.path.join(checkpoints, "_locks")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{stream}.lock")
    record = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started_at": "2026-11-23T10:00:00Z",
    }
    record |= {"command": "medallion run (stream)", "run_id": "planted", **holder}
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    return path


def test_a_held_lock_refuses_a_second_writer_naming_the_holder_and_is_released(checkpoints):
    with stream_locks(checkpoints, ["bronze_events", "silver_events"], "first") as first:
        with pytest.raises(LockHeld) as refused:
            StreamLocks(checkpoints, ["silver_events"], "second").acquire()
        message = str(refused.value)
        assert "stream 'silver_events' is already being written by another run" in message
        assert f"host {socket.gethostname()}, pid {os.getpid()}, since " in message
        assert "(first)" in message
        assert set(lock_holders(checkpoints, ["bronze_events", "gold_x"])) == {"bronze_events"}
        assert first.holder.run_id in Path(first.path("bronze_events")).read_text()
    assert lock_holders(checkpoints, ["bronze_events", "silver_events"]) == {}
    # All or nothing: a refused acquire keeps none of the locks it took before the refusal.
    with stream_locks(checkpoints, ["silver_events"], "holder"):
        with pytest.raises(LockHeld):
            StreamLocks(checkpoints, ["bronze_events", "silver_events"], "both").acquire()
        assert set(lock_holders(checkpoints, ["bronze_events"])) == set()


def test_a_lock_of_a_dead_process_on_this_host_is_taken_over_at_once(checkpoints):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _plant(checkpoints, "bronze_events", pid=dead.pid)
    with stream_locks(checkpoints, ["bronze_events"], "new") as locks:
        assert locks.holder.run_id in Path(locks.path("bronze_events")).read_text()


def test_a_reused_pid_does_not_keep_a_lock_alive(checkpoints):
    _plant(checkpoints, "bronze_events", pid=os.getpid(), process_start="1")
    with stream_locks(checkpoints, ["bronze_events"], "new"):
        pass


def test_another_hosts_lock_holds_until_its_heartbeat_is_older_than_the_lease(checkpoints):
    path = _plant(checkpoints, "bronze_events", host="other-host", pid=4242)
    with pytest.raises(LockHeld, match="host other-host, pid 4242"):
        StreamLocks(checkpoints, ["bronze_events"], "new").acquire()
    old = time.time() - LEASE_SECONDS - 5
    os.utime(path, (old, old))
    with stream_locks(checkpoints, ["bronze_events"], "new") as locks:
        assert locks.holder.run_id in Path(path).read_text()


def test_a_live_lock_is_waited_for_when_asked(checkpoints):
    holder = StreamLocks(checkpoints, ["_setup"], "creating").acquire()
    started = time.monotonic()
    threading.Timer(0.5, holder.release).start()
    with stream_locks(checkpoints, ["_setup"], "waiting", wait_seconds=30):
        assert time.monotonic() - started >= 0.4


def test_no_lock_is_taken_on_remote_storage():
    config = Config(landing="s3://bucket/landing", lake="s3://bucket/lake")
    with stream_locks(config.checkpoints_folder, ["bronze_events"], "remote") as locks:
        assert locks.folder is None


def test_a_run_gives_up_its_locks_to_a_pause_request_and_takes_them_back_after(checkpoints):
    asked = [pause_request("retail")]
    run = StreamLocks(checkpoints, ["bronze_events"], "medallion run (stream)").acquire()
    assert pause_asked(checkpoints, asked) is None
    request = StreamLocks(checkpoints, asked, "medallion erase").acquire()
    assert pause_asked(checkpoints, asked) == "medallion erase"
    resumed: list[bool] = []
    pausing = threading.Thread(
        target=lambda: resumed.append(paused_for(run, asked, "medallion erase", threading.Event()))
    )
    pausing.start()
    # The run's lock comes free for the command, which takes it, then gives both up.
    with stream_locks(checkpoints, ["bronze_events"], "medallion erase", wait_seconds=5):
        assert lock_holders(checkpoints, ["bronze_events"])["bronze_events"].command == (
            "medallion erase"
        )
    request.release()
    pausing.join(10)
    assert resumed == [True]
    assert lock_holders(checkpoints, ["bronze_events"])["bronze_events"].run_id == run.holder.run_id
    # A request left by a dead process is stale: no run pauses for it.
    _plant(checkpoints, asked[0], pid=2**22 + 17, command="medallion erase")
    assert pause_asked(checkpoints, asked) is None
    # Stopped while paused: the run ends without taking its locks back.
    request = StreamLocks(checkpoints, asked, "medallion erase").acquire()
    stop = threading.Event()
    stop.set()
    assert not paused_for(run, asked, "medallion erase", stop)
    assert lock_holders(checkpoints, ["bronze_events"]) == {}
    request.release()


# One racer: for each round, waits for the start file (spinning, so that the racers start within
# microseconds of each other), tries to take that round's stale lock, and keeps what it took.
RACER = r"""
import json, os, sys
from medallion.locks import LockHeld, StreamLocks
folder, checkpoints, rounds, me = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
won, kept = [], []
open(os.path.join(folder, f"ready-{me}"), "w").close()
for i in range(rounds):
    go = os.path.join(folder, f"go-{i}")
    while not os.path.exists(go):
        pass
    locks = StreamLocks(checkpoints, [f"stream_{i}"], f"racer {me}")
    try:
        kept.append(locks.acquire())
        won.append(locks.holder.run_id)
    except LockHeld:
        won.append(None)
    open(os.path.join(folder, f"done-{i}-{me}"), "w").close()
print(json.dumps(won))
"""


def _wait_for_files(paths: list[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not all(os.path.exists(p) for p in paths):
        assert time.monotonic() < deadline, f"no {paths}"
        time.sleep(0.001)


@pytest.mark.slow  # processes: left out of make test-fast (docs/testing.md)
def test_racing_takers_of_a_stale_lock_leave_it_to_exactly_one(checkpoints, tmp_path):
    """Processes that find the same stale lock at the same moment: one takes it, the others
    are refused, every round. (Reading the stale lock, then renaming it aside, let two of four
    racers on two cores both take it in about one round in a hundred: this test failed on it
    in most of its runs.)"""
    rounds, racers = 300, ["a", "b", "c", "d"]
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    for i in range(rounds):  # left by a crash on this host, or by another host long silent
        if i % 2:
            path = _plant(checkpoints, f"stream_{i}", host="other-host", pid=4242)
            old = time.time() - LEASE_SECONDS - 5
            os.utime(path, (old, old))
        else:
            _plant(checkpoints, f"stream_{i}", pid=dead.pid)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(barrier), checkpoints, str(rounds), me],
            stdout=subprocess.PIPE,
            text=True,
        )
        for me in racers
    ]
    try:
        _wait_for_files([str(barrier / f"ready-{me}") for me in racers])
        for i in range(rounds):
            (barrier / f"go-{i}").touch()
            _wait_for_files([str(barrier / f"done-{i}-{me}") for me in racers])
        won = [json.loads(p.communicate(timeout=60)[0]) for p in processes]
    finally:
        for process in processes:  # a racer left spinning by a failure
            process.kill()
            process.wait()
    folder = Path(checkpoints) / "_locks"
    for i, takers in enumerate(zip(*won, strict=True)):
        winners = [run_id for run_id in takers if run_id is not None]
        assert len(winners) == 1, f"round {i}: {len(winners)} runs took the lock"
        assert json.loads((folder / f"stream_{i}.lock").read_text())["run_id"] == winners[0]
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        f"stream_{i}.lock" for i in range(rounds)
    ), "claims or staged files left behind"


@pytest.fixture
def short_lease(monkeypatch) -> None:
    """Heartbeats every 50 ms, a lease of 3 s: a holder stops writing after 2.9 s unrenewed."""
    monkeypatch.setattr(lease, "HEARTBEAT_SECONDS", 0.05)
    monkeypatch.setattr(lease, "LEASE_SECONDS", 3.0)


def _swap_in(path: str, make) -> None:
    """Replace the file ``path`` in one step by what ``make(aside)`` creates."""
    aside = f"{path}.swap"
    make(aside)
    os.replace(aside, path)


def test_a_holder_whose_lock_is_taken_over_stops_writing(checkpoints, short_lease):
    locks = StreamLocks(checkpoints, ["bronze_events", "silver_events"], "medallion run").acquire()
    written = []

    def write(batch: int) -> None:  # as every foreachBatch function is guarded (sinks.py)
        check_lease(os.path.join(checkpoints, "bronze_events"))
        written.append(batch)

    write(1)
    locks.check()
    taker = {"host": "other-host", "pid": 4242, "started_at": "2026-11-23T10:00:00Z"}
    taker |= {"command": "medallion run (stream)", "run_id": "taker"}
    taken = time.monotonic()
    _swap_in(locks.path("bronze_events"), lambda aside: Path(aside).write_text(json.dumps(taker)))
    assert locks.lost.wait(lease.LEASE_SECONDS)
    assert time.monotonic() - taken < lease.safe_seconds()
    with pytest.raises(LeaseLost, match="bronze_events.lock was taken by host other-host"):
        write(2)
    with pytest.raises(LeaseLost, match="medallion run stopped writing 'bronze_events'"):
        locks.check()
    assert written == [1]
    # Released: the lock it lost stays the taker's; the one it still held is given up.
    locks.release()
    assert set(lock_holders(checkpoints, ["bronze_events", "silver_events"])) == {"bronze_events"}
    assert lock_holders(checkpoints, ["bronze_events"])["bronze_events"].run_id == "taker"
    write(3)  # no longer this process's lock: not its to check
    assert written == [1, 3]


def test_a_holder_that_cannot_renew_its_lease_stops_writing_before_it_lapses(
    checkpoints, short_lease
):
    locks = StreamLocks(checkpoints, ["bronze_events"], "medallion run").acquire()
    checkpoint = os.path.join(checkpoints, "bronze_events")
    path = locks.path("bronze_events")
    # The file system fails every read and touch of the lock (a symbolic link to itself, as a
    # FUSE mount that answers with errors): a few failures are tried again...
    failing = time.monotonic()
    _swap_in(path, lambda aside: os.symlink(os.path.basename(path), aside))
    with pytest.raises(OSError):
        os.utime(path)
    time.sleep(0.5)
    assert not locks.lost.is_set()
    check_lease(checkpoint)
    # ... until the lease could lapse: then the holder stops writing, before it does.
    assert locks.lost.wait(lease.LEASE_SECONDS)
    assert time.monotonic() - failing < lease.LEASE_SECONDS
    with pytest.raises(LeaseLost, match=r"bronze_events.lock was not renewed for \d+ s"):
        check_lease(checkpoint)
    locks.release()
    assert os.path.islink(path)  # not this run's to remove
