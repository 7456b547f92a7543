"""The declared flows of every pipeline, looked up by name, by layer and by fusion."""

from __future__ import annotations

from collections.abc import Sequence

from medallion.declarations import LAYERS, Flow
from medallion.pipelines import all_flows

__all__ = ["LAYERS", "Flow", "all_flows", "flow", "flows_by_layer", "fusion_head"]


def flows_by_layer(flows: Sequence[Flow] | None = None) -> list[tuple[str, list[Flow]]]:
    """The flows grouped by layer, upstream layers first."""
    flows = all_flows() if flows is None else flows
    return [(layer, [f for f in flows if f.layer == layer]) for layer in LAYERS]


def flow(name: str) -> Flow:
    """The flow with this query name."""
    flows = all_flows()
    for candidate in flows:
        if candidate.name == name:
            return candidate
    raise KeyError(f"unknown stream {name!r}; known: {', '.join(f.name for f in flows)}")


def fusion_head(name: str, flows: Sequence[Flow] | None = None) -> Flow | None:
    """The flow whose batches carry out the work of flow ``name``, if it is fused into one."""
    return next((f for f in (all_flows() if flows is None else flows) if name in f.fuses), None)
