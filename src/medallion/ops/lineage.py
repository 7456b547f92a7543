"""What each stream reads and writes, derived from ``FLOWS``: upstream, downstream, sources.

``Flow.reads`` is text meant for people (``"silver/events + silver/customers"``,
``"silver/customers (change data feed)"``); the table keys in it are the flow's inputs, and
the first one is its streaming source (the others are read as static tables).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from medallion.config import TABLES
from medallion.streams.flows import FLOWS, Flow

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*/[A-Za-z_][A-Za-z0-9_]*")


def inputs(flow: Flow) -> tuple[str, ...]:
    """The table keys a flow reads (``landing/<dataset>`` for a file or Kafka source)."""
    return tuple(key for key in _KEY.findall(flow.reads))


def stream_source(flow: Flow) -> str:
    """The key the flow reads as a stream: its checkpoint's ``sources/0``."""
    found = inputs(flow)
    if not found:
        raise ValueError(f"stream {flow.name!r} names no input in {flow.reads!r}")
    return found[0]


def readers(table: str, flows: Iterable[Flow] = FLOWS) -> list[Flow]:
    """The flows that read ``table`` (as a stream or as a static table)."""
    return [f for f in flows if table in inputs(f)]


def stream_readers(table: str, flows: Iterable[Flow] = FLOWS) -> list[Flow]:
    """The flows that read ``table`` as a stream (whose checkpoint tracks a position in it)."""
    return [f for f in flows if stream_source(f) == table]


def writer(table: str, flows: Iterable[Flow] = FLOWS) -> Flow | None:
    """The flow that writes ``table``, if any."""
    return next((f for f in flows if table in f.writes), None)


def downstream(
    tables: Iterable[str], flows: Iterable[Flow] = FLOWS
) -> tuple[list[Flow], list[str]]:
    """Everything that has to be rebuilt when ``tables`` are rebuilt.

    A flow whose output is rebuilt is rebuilt whole (its checkpoint restarts it from scratch,
    so every one of its outputs is rebuilt with it), and so is every flow that reads a rebuilt
    table, transitively. Returns (flows, tables), each in ``FLOWS``/``TABLES`` order.
    """
    flows = tuple(flows)
    chosen_tables = set(tables)
    unknown = chosen_tables - set(TABLES)
    if unknown:
        raise ValueError(f"unknown tables: {', '.join(sorted(unknown))}")
    chosen_flows: set[str] = set()
    changed = True
    while changed:
        changed = False
        for flow in flows:
            if flow.name in chosen_flows:
                continue
            if chosen_tables & set(flow.writes) or chosen_tables & set(inputs(flow)):
                chosen_flows.add(flow.name)
                chosen_tables |= set(flow.writes)
                changed = True
    ordered_flows = [f for f in flows if f.name in chosen_flows]
    ordered_tables = [key for key in TABLES if key in chosen_tables]
    return ordered_flows, ordered_tables
