"""A dr_bringup run's plan: the topology file and the flows it brings up, checked by validation. It travels between
tasks (XCom) as one {"flow", "topology"} per flow, which are also the kwargs of the per-flow mapped operators."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..plans import fields_of
from ..topology import Flow, Topology, load_topology


@dataclass(frozen=True)
class BringupPlan:
    topology: str
    flows: tuple[str, ...]

    def load(self) -> tuple[Topology, list[Flow]]:
        """The topology and the plan's flows in it."""
        topo = load_topology(self.topology)
        return topo, [topo.flow(name) for name in self.flows]

    def to_kwargs(self) -> list[dict[str, str]]:
        return [{"flow": name, "topology": self.topology} for name in self.flows]

    @classmethod
    def from_kwargs(cls, entries: Iterable[Mapping[str, Any]]) -> BringupPlan:
        """The plan `to_kwargs` made; ValueError when it is empty, an entry lacks a key or names another topology."""
        entries = [fields_of(entry, "bring-up plan entry", "flow", "topology") for entry in entries]
        if not entries:
            raise ValueError("bring-up plan: no flow")
        topologies = {entry["topology"] for entry in entries}
        if len(topologies) > 1:
            raise ValueError(f"bring-up plan: flows of several topologies: {', '.join(sorted(topologies))}")
        return cls(entries[0]["topology"], tuple(entry["flow"] for entry in entries))
