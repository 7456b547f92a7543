"""How much an available-now run has to read, known before its JVM starts, and the JVM options
that suit it.

A run that reads little spends most of its CPU compiling: C1 alone, with the larger code cache
it needs, made a 5,000-event delivery about a fifth faster, while a 1M-event backfill is
faster with C2 (docs/development.md, "JVM options"). What a run reads is the landed bytes its
file sources have not taken yet, from their checkpoints; a Kafka run or a remote landing folder
cannot tell, and starts as any other.
"""

from __future__ import annotations

import os

from medallion.config import Config
from medallion.declarations import Landing
from medallion.deployment import flows_of
from medallion.streams.checkpoint_files import landed_files, unread_files

# Up to this many landed bytes not read yet (about 100,000 retail events), a run is small.
SMALL_RUN_BYTES = 32 * 1024 * 1024
# C1 alone; its default 48 MB code cache fills within a minute of Spark, and the JVM then
# interprets what it cannot compile.
SMALL_RUN_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m"


def pending_landing_bytes(config: Config) -> int | None:
    """The bytes of the landed files that the run's file sources have not taken yet; None when
    that cannot be told before Spark starts (Kafka, a landing folder that is not local)."""
    if config.source != "files":
        return None
    total = 0
    for flow in flows_of(config):
        if not isinstance(flow.source, Landing):
            continue
        folder = config.landing_dir(flow.source.dataset)
        if "://" in folder:
            return None
        unread = unread_files(config.checkpoint(flow.name), landed_files(folder))
        try:
            total += sum(os.path.getsize(path) for path in unread)
        except OSError:  # a file removed while listing: no estimate
            return None
    return total


def jvm_options_for(pending_bytes: int | None) -> str:
    """:data:`SMALL_RUN_JVM_OPTIONS` for a run with at most :data:`SMALL_RUN_BYTES` to read,
    else nothing (also when that is unknown)."""
    small = pending_bytes is not None and pending_bytes <= SMALL_RUN_BYTES
    return SMALL_RUN_JVM_OPTIONS if small else ""


def run_jvm_options(config: Config, streaming: bool) -> str:
    """The JVM options of a run of ``config``: :func:`jvm_options_for` its pending landed
    bytes when it runs available now; nothing for a stream, which lives long enough for C2."""
    return "" if streaming else jvm_options_for(pending_landing_bytes(config))
