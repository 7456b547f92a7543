"""Colour on a terminal only: off when the output is piped, with NO_COLOR and with TERM=dumb.

``medallion status`` on a lake that does not exist fails before Spark starts, with one line
on stderr: red on a terminal (a pseudo-terminal here), plain anywhere else.
"""

from __future__ import annotations

import os
import pty
import subprocess

import pytest
from processes import MEDALLION

ANSI = "\x1b["


def _on_a_terminal(args: list[str], env: dict[str, str]) -> str:
    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen(
            args, stdin=follower, stdout=follower, stderr=follower, env=env, close_fds=True
        )
        os.close(follower)
        output = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal closed: the process has gone
                break
            if not chunk:
                break
            output += chunk
        assert process.wait(timeout=60) == 2
        return output.decode()
    finally:
        os.close(leader)


@pytest.mark.parametrize(
    ("setting", "coloured"),
    [({}, True), ({"NO_COLOR": "1"}, False), ({"TERM": "dumb"}, False)],
    ids=["terminal", "NO_COLOR", "TERM=dumb"],
)
def test_an_error_is_red_on_a_terminal_only(tmp_path, setting, coloured):
    args = [MEDALLION, "status", "--lake", str(tmp_path / "no-lake")]
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TERM")}
    env["TERM"] = "xterm-256color"
    shown = _on_a_terminal(args, {**env, **setting})
    assert "medallion status: error: no lake at" in shown
    assert (ANSI in shown) is coloured, repr(shown)
    piped = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
    assert piped.returncode == 2 and "no lake at" in piped.stderr and ANSI not in piped.stderr
