"""Stream locks without Spark: refusal, release, and safe takeover of stale locks."""

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

from medallion.config import Config
from medallion.locks import LEASE_SECONDS, LockHeld, StreamLocks, lock_holders, stream_locks
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
