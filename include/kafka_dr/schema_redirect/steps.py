"""The redirects a DR run makes: the one dr_schema_redirect is asked for, the failed primary's registry taken over
by the failover target, and handed back to the restored primary on failback. Each reaches the registries and the
store cluster (its id is the sign that a registry restarted onto it) through the run's ClusterAccess; each raises
RegistryError with one line."""

from __future__ import annotations

from typing import Any

from ..access import ClusterAccess
from ..schema_registry import (
    Redirect,
    answers,
    first_url,
    redirect,
    store_cluster_id,
    writes_through,
)
from ..topology import Topology
from .plan import RedirectPlan


def redirect_registry(plan: RedirectPlan, access: ClusterAccess) -> Redirect:
    """Redirect, restart and verify the plan's registry."""
    store_id = store_cluster_id(access.config(plan.store))
    return redirect(access, plan.registry, plan.store, plan.leader_eligible, store_id=store_id)


def take_over(access: ClusterAccess, failed: str, target: str) -> dict[str, Any]:
    """Failover: when the failed cluster held the primary registry, the target's registry leads on its own store;
    else why nothing was done ({"skipped": ...}). The failed cluster's registry, when it answers (a planned failover),
    first follows the target's store and loses leader eligibility, and a probe registered through it must land in
    the target's store: one leader across both DCs (`one_leader`), so a client left on the old registry cannot get
    an id the new leader issues to another schema. dr_failback's `hand_back` restores both roles."""
    topo = access.topology
    skipped = take_over_skipped(topo, failed, target)
    if skipped is not None:
        return {"skipped": skipped}
    store_id = store_cluster_id(access.config(target))
    old = topo.cluster(failed).schema_registry
    follower: dict[str, Any] = {"skipped": f"the {failed} registry does not answer: it is demoted by dr_failback"}
    if old is not None and answers(
        first_url(old), access.registry_headers(failed)
    ):  # before the target leads: never two
        follower = redirect(access, failed, target, leader_eligible=False, store_id=store_id).to_dict()
    result = {
        "primary": redirect(access, target, target, leader_eligible=True, store_id=store_id).to_dict(),
        "follower": follower,
    }
    if "skipped" not in follower:
        result["one_leader"] = {"via": failed, "probe_id": writes_through(access, failed, target)}
    return result


def take_over_skipped(topo: Topology, failed: str, target: str) -> str | None:
    """Why a failover from `failed` to `target` leaves the registries as they are; None when `take_over` moves the
    primary."""
    primary = topo.schema_registry_primary
    if primary != failed:
        return f"the primary registry is {primary or 'not set'}, not on {failed}"
    if topo.cluster(target).schema_registry is None:
        return f"cluster {target} has no schema registry"
    return None


def hand_back(access: ClusterAccess, restored: str, serving: str) -> dict[str, Any]:
    """Failback: when the primary registry is on the restored cluster, the serving cluster's registry first follows
    the restored store and loses leader eligibility, then the restored registry leads on its own store again (the
    reverse of `take_over`, never two leaders), and a probe through the serving registry shows one leader; else why
    nothing was done."""
    topo = access.topology
    primary = topo.schema_registry_primary
    if primary != restored:
        return {"skipped": f"the primary registry is {primary or 'not set'}, not on {restored}"}
    store_id = store_cluster_id(access.config(restored))
    follows = topo.cluster(serving).schema_registry is not None
    follower = (
        redirect(access, serving, primary, leader_eligible=False, store_id=store_id).to_dict() if follows else None
    )
    results: dict[str, Any] = {
        "primary": redirect(access, primary, primary, leader_eligible=True, store_id=store_id).to_dict()
    }
    if follower is not None:
        results["follower"] = follower
        results["one_leader"] = {"via": serving, "probe_id": writes_through(access, serving, primary)}
    return results
