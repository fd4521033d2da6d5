"""A dr_bringup run's plan: the topology file and the flows it brings up, checked by validation."""

from __future__ import annotations

from dataclasses import dataclass

from ..topology import Flow, Topology, load_topology


@dataclass(frozen=True)
class BringupPlan:
    topology: str
    flows: tuple[str, ...]

    def load(self) -> tuple[Topology, list[Flow]]:
        """The topology and the plan's flows in it."""
        topo = load_topology(self.topology)
        return topo, [topo.flow(name) for name in self.flows]
