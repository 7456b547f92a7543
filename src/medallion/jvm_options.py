"""The options local JVMs (driver and executors) start with: the collector, the compilers, the
heap, and the user's own (``MEDALLION_JAVA_OPTIONS``)."""

from __future__ import annotations

import os
import re

# The collector and compilers of local JVMs (driver and executors). The parallel collector's
# write barriers cost tasks less than G1's, and on 2 cores its threads take half the CPU of G1's.
# C2 compiles a method after ten times the default count of calls and loops: a run executes many
# plans a few times each, and C2 spent a third of a backfill's CPU on code it would not run
# much longer. A 1M-event backfill took 23% less CPU; docs/development.md, "JVM options".
LOCAL_JVM_OPTIONS = (
    "-XX:+UseParallelGC",
    "-XX:Tier4InvocationThreshold=50000",
    "-XX:Tier4MinInvocationThreshold=6000",
    "-XX:Tier4CompileThreshold=150000",
    "-XX:Tier4BackEdgeThreshold=400000",
)
_COLLECTOR_OPTION = re.compile(r"-XX:\+Use\w+GC\b")

# The local driver's heap. 1 GiB took a backfill of 2M events in one batch (batches are cached
# with memory-and-disk storage); 2 GiB took about the same time for 1M events and 1 GB more
# resident memory, which the JVM gives back to the system only when it exits.
DEFAULT_DRIVER_MEMORY = "1g"


def driver_memory() -> str:
    """The local driver's heap: ``MEDALLION_DRIVER_MEMORY``, else :data:`DEFAULT_DRIVER_MEMORY`."""
    return os.environ.get("MEDALLION_DRIVER_MEMORY", DEFAULT_DRIVER_MEMORY)


def java_options() -> str:
    """More options for the local JVMs, from ``MEDALLION_JAVA_OPTIONS`` (empty by default),
    given after :data:`LOCAL_JVM_OPTIONS`, so that they win.

    Short-lived sessions on small data are cheaper with ``-XX:TieredStopAtLevel=1
    -XX:ReservedCodeCacheSize=256m``; long runs are faster without them (docs/development.md).
    ``medallion run`` picks them for a run with little to read (medallion/streams/run_size.py).
    """
    return os.environ.get("MEDALLION_JAVA_OPTIONS", "").strip()


def with_java_options(defaults: str, options: str) -> str:
    """A JVM's ``defaults`` followed by ``options``; a collector that ``options`` choose
    replaces the default one (a JVM refuses two).

    >>> with_java_options("-Da=1 -XX:+UseParallelGC", "-XX:+UseG1GC")
    '-Da=1 -XX:+UseG1GC'
    >>> with_java_options("-Da=1 -XX:+UseParallelGC", "")
    '-Da=1 -XX:+UseParallelGC'
    """
    if _COLLECTOR_OPTION.search(options):
        defaults = " ".join(o for o in defaults.split() if not _COLLECTOR_OPTION.fullmatch(o))
    return " ".join(filter(None, [defaults, options]))
