"""A dr_schema_redirect run's plan, checked by validation; it travels between tasks as a plain dict (XCom)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..plans import fields_of
from ..topology import Topology


@dataclass(frozen=True)
class RedirectPlan:
    """Point `registry`'s schema registry at `store`'s `_schemas`, leader-eligible or not."""

    topology: str
    registry: str
    store: str
    leader_eligible: bool

    @classmethod
    def build(
        cls, topo: Topology, topology_file: str, registry: Any, store: Any, leader_eligible: bool
    ) -> RedirectPlan:
        """TopologyError or ValueError with one line when a cluster is unknown or `registry` has no registry."""
        if topo.cluster(str(registry)).schema_registry is None:
            raise ValueError(f"param registry_cluster: cluster {registry} has no schema_registry URL")
        topo.cluster(str(store))
        return cls(topology_file, str(registry), str(store), leader_eligible)

    def to_dict(self) -> dict[str, Any]:
        return {
            "topology": self.topology,
            "registry": self.registry,
            "store": self.store,
            "leader_eligible": self.leader_eligible,
        }

    @classmethod
    def from_dict(cls, data: Any) -> RedirectPlan:
        data = fields_of(data, "schema redirect plan", "topology", "registry", "store", "leader_eligible")
        return cls(data["topology"], data["registry"], data["store"], data["leader_eligible"])
