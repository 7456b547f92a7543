"""Named points inside a batch where a crash test can hold the process, to kill it there.

The crash suite (tests/integration/test_reliability.py) kills runs between two writes of one
micro-batch, for example after the quarantine append and before the silver MERGE. Timing alone
rarely lands a kill in such a gap, so a run started with ``MEDALLION_PAUSE_AT=<point>`` stops
at that point: it creates ``$MEDALLION_PAUSE_DIR/<point>`` and sleeps, and the test kills it.
Without the variable (always, outside tests) a point costs one environment lookup.
"""

from __future__ import annotations

import os
import time

PAUSE_AT_ENV = "MEDALLION_PAUSE_AT"
PAUSE_DIR_ENV = "MEDALLION_PAUSE_DIR"
# Long enough for any test to notice and kill; the run goes on afterwards if nobody did.
PAUSE_SECONDS = 600.0


def pause_point(name: str) -> None:
    """Hold here when ``MEDALLION_PAUSE_AT`` names this point (comma-separated names)."""
    wanted = os.environ.get(PAUSE_AT_ENV)
    if not wanted or name not in wanted.split(","):
        return
    folder = os.environ.get(PAUSE_DIR_ENV)
    if folder:
        with open(os.path.join(folder, name), "w", encoding="utf-8") as marker:
            marker.write(f"{os.getpid()}\n")
    time.sleep(PAUSE_SECONDS)
