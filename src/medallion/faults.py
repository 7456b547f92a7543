"""Named points inside a batch where a crash test can hold the process, to kill it there.

The crash suite (tests/integration/test_reliability.py) kills runs between two writes of one
micro-batch, for example after the quarantine append and before the silver MERGE. Timing alone
rarely lands a kill in such a gap, so a run started with ``MEDALLION_PAUSE_AT=<point>`` stops
at that point: it creates ``$MEDALLION_PAUSE_DIR/<point>`` and sleeps, and the test kills it.
A test that runs the engine in its own process sets ``MEDALLION_FAIL_AT=<point>`` instead: the
point raises :class:`InjectedFault`, and what the run left behind is all the next one finds, as
after a kill. Without the variables (always, outside tests) a point costs two environment
lookups.
"""

from __future__ import annotations

import os
import time

PAUSE_AT_ENV = "MEDALLION_PAUSE_AT"
FAIL_AT_ENV = "MEDALLION_FAIL_AT"
PAUSE_DIR_ENV = "MEDALLION_PAUSE_DIR"
# Long enough for any test to notice and kill; the run goes on afterwards if nobody did.
PAUSE_SECONDS = 600.0


class InjectedFault(RuntimeError):
    """The failure ``MEDALLION_FAIL_AT`` asked for."""


def pause_point(name: str) -> None:
    """Hold here when ``MEDALLION_PAUSE_AT`` names this point, fail here when
    ``MEDALLION_FAIL_AT`` does (comma-separated names)."""
    failing = os.environ.get(FAIL_AT_ENV)
    if failing and name in failing.split(","):
        raise InjectedFault(f"injected failure at {name}")
    wanted = os.environ.get(PAUSE_AT_ENV)
    if not wanted or name not in wanted.split(","):
        return
    folder = os.environ.get(PAUSE_DIR_ENV)
    if folder:
        with open(os.path.join(folder, name), "w", encoding="utf-8") as marker:
            marker.write(f"{os.getpid()}\n")
    time.sleep(PAUSE_SECONDS)
