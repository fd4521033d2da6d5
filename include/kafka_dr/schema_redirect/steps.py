"""The redirects a DR run makes: the one dr_schema_redirect is asked for, the failed primary's registry taken over
by the failover target, and handed back to the restored primary on failback. Each needs the registries' credentials
in the environment (kafka_dr.schema_registry.auth_headers); each raises RegistryError with one line."""

from __future__ import annotations

from typing import Any

from ..schema_registry import Redirect, redirect
from ..topology import Topology, load_topology
from .plan import RedirectPlan


def redirect_registry(plan: RedirectPlan) -> Redirect:
    """Redirect, restart and verify the plan's registry."""
    return redirect(load_topology(plan.topology), plan.registry, plan.store, plan.leader_eligible)


def take_over(topo: Topology, failed: str, target: str) -> dict[str, Any]:
    """Failover: when the failed cluster held the primary registry, the target's registry leads on its own store;
    else why nothing was done ({"skipped": ...})."""
    primary = topo.schema_registry_primary
    if primary != failed:
        return {"skipped": f"the primary registry is {primary or 'not set'}, not on {failed}"}
    if topo.cluster(target).schema_registry is None:
        return {"skipped": f"cluster {target} has no schema registry"}
    return redirect(topo, target, target, leader_eligible=True).to_dict()


def hand_back(topo: Topology, restored: str, serving: str) -> dict[str, Any]:
    """Failback: when the primary registry is on the restored cluster, it leads on its own store again and the
    serving cluster's registry follows that store (the reverse of `take_over`); else why nothing was done."""
    primary = topo.schema_registry_primary
    if primary != restored:
        return {"skipped": f"the primary registry is {primary or 'not set'}, not on {restored}"}
    results = {"primary": redirect(topo, primary, primary, leader_eligible=True).to_dict()}
    if topo.cluster(serving).schema_registry is not None:
        results["follower"] = redirect(topo, serving, primary, leader_eligible=False).to_dict()
    return results
