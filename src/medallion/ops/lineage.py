"""What each stream reads and writes, derived from the declared flows: upstream,
downstream, sources."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from medallion.declarations import Flow, Landing, Pipeline, Table
from medallion.pipelines import all_flows, all_tables


def readers(table: str, flows: Iterable[Flow] | None = None) -> list[Flow]:
    """The flows that read ``table`` (as a stream or as a static table)."""
    return [f for f in (all_flows() if flows is None else flows) if table in f.inputs]


def stream_readers(table: str, flows: Iterable[Flow] | None = None) -> list[Flow]:
    """The flows that read ``table`` as a stream (whose checkpoint tracks a position in it)."""
    return [f for f in (all_flows() if flows is None else flows) if f.source.key == table]


def writer(table: str, flows: Iterable[Flow] | None = None) -> Flow | None:
    """The flow that writes ``table``, if any."""
    return next((f for f in (all_flows() if flows is None else flows) if table in f.writes), None)


def downstream(
    tables: Iterable[str], flows: Iterable[Flow] | None = None
) -> tuple[list[Flow], list[str]]:
    """Everything that has to be rebuilt when ``tables`` are rebuilt.

    A flow whose output is rebuilt is rebuilt whole (its checkpoint restarts it from scratch,
    so every one of its outputs is rebuilt with it), and so is every flow that reads a rebuilt
    table, transitively. Returns (flows, tables), each in their declared order.
    """
    flows = all_flows() if flows is None else tuple(flows)
    declared = all_tables()
    chosen_tables = set(tables)
    unknown = chosen_tables - set(declared)
    if unknown:
        raise ValueError(f"unknown tables: {', '.join(sorted(unknown))}")
    chosen_flows: set[str] = set()
    changed = True
    while changed:
        changed = False
        for flow in flows:
            if flow.name in chosen_flows:
                continue
            if chosen_tables & set(flow.writes) or chosen_tables & set(flow.inputs):
                chosen_flows.add(flow.name)
                chosen_tables |= set(flow.writes)
                changed = True
    ordered_flows = [f for f in flows if f.name in chosen_flows]
    ordered_tables = [key for key in declared if key in chosen_tables]
    return ordered_flows, ordered_tables


def _node(source: Table | Landing) -> str:
    name = source.key.replace("/", "__")
    return f'{name}[/"{source.key}"/]' if isinstance(source, Landing) else f'{name}["{source.key}"]'


def mermaid(pipelines: Sequence[Pipeline]) -> str:
    """A Mermaid flowchart of every flow of ``pipelines``: an arrow from what a flow reads to
    each table it writes, named after the flow (dotted from a table it joins)."""
    lines = ["flowchart LR"]
    for pipeline in pipelines:
        lines.append(f"  subgraph {pipeline.name}")
        for flow in pipeline.flows:
            label = f"{flow.name} (change data feed)" if flow.change_feed else flow.name
            for output in flow.outputs:
                lines.append(f'    {_node(flow.source)} -->|"{label}"| {_node(output)}')
                lines += [f'    {_node(j)} -.->|"{flow.name}"| {_node(output)}' for j in flow.joins]
        lines.append("  end")
    return "\n".join(lines) + "\n"
