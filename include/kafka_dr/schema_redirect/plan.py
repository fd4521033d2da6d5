"""A dr_schema_redirect run's plan, checked by validation; it travels between tasks as plain JSON (XCom) through
kafka_dr.codec."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
