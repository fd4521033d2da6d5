"""The redirects a DR run makes: the one dr_schema_redirect is asked for, the failed primary's registry taken over
by the failover target, and handed back to the restored primary on failback. Each reaches the registries and the
store cluster (its id is the sign that a registry restarted onto it) through the run's ClusterAccess; each raises
RegistryError with one line."""

from __future__ import annotations

from dataclasses import dataclass

from ..access import ClusterAccess
from ..reports import Step
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


@dataclass(frozen=True)
class Redirected(Redirect):
    """dr_schema_redirect's result: the redirect, and the seconds its whole task took (most of it the restart)."""

    task_seconds: float


@dataclass(frozen=True)
class Skipped:
    """A registry left as it was, and why."""

    skipped: str


@dataclass(frozen=True)
class OneLeader:
    """A probe registered through the follower's registry `via` landed in the leader's store: one leader across both
    DCs."""

    via: str
    probe_id: int


@dataclass(frozen=True)
class RegistryMove:
    """What a DR switch did with the registries (`take_over`, `hand_back`; the report's `schema_registry`): `skipped`,
    why they stayed as they were; else the `primary`'s redirect, the `follower`'s (or why it was not redirected) and
    the probe that showed `one_leader`. `step`: when its task ran."""

    skipped: str | None = None
    primary: Redirect | None = None
    follower: Redirect | Skipped | None = None
    one_leader: OneLeader | None = None
    step: Step | None = None


def redirect_registry(plan: RedirectPlan, access: ClusterAccess) -> Redirect:
    """Redirect, restart and verify the plan's registry."""
    store_id = store_cluster_id(access.config(plan.store))
    return redirect(access, plan.registry, plan.store, plan.leader_eligible, store_id=store_id)


def take_over(access: ClusterAccess, failed: str, target: str) -> RegistryMove:
    """Failover: when the failed cluster held the primary registry, the target's registry leads on its own store;
    else why nothing was done (`skipped`). The failed cluster's registry, when it answers (a planned failover),
    first follows the target's store and loses leader eligibility, and a probe registered through it must land in
    the target's store: one leader across both DCs (`one_leader`), so a client left on the old registry cannot get
    an id the new leader issues to another schema. dr_failback's `hand_back` restores both roles."""
    topo = access.topology
    skipped = take_over_skipped(topo, failed, target)
    if skipped is not None:
        return RegistryMove(skipped=skipped)
    store_id = store_cluster_id(access.config(target))
    old = topo.cluster(failed).schema_registry
    if old is None or not answers(first_url(old), access.registry_headers(failed)):
        gone = Skipped(f"the {failed} registry does not answer: it is demoted by dr_failback")
        return RegistryMove(
            primary=redirect(access, target, target, leader_eligible=True, store_id=store_id), follower=gone
        )
    # The old primary follows before the target leads: never two leaders.
    follower = redirect(access, failed, target, leader_eligible=False, store_id=store_id)
    primary = redirect(access, target, target, leader_eligible=True, store_id=store_id)
    return RegistryMove(
        primary=primary, follower=follower, one_leader=OneLeader(failed, writes_through(access, failed, target))
    )


def take_over_skipped(topo: Topology, failed: str, target: str) -> str | None:
    """Why a failover from `failed` to `target` leaves the registries as they are; None when `take_over` moves the
    primary."""
    primary = topo.schema_registry_primary
    if primary != failed:
        return f"the primary registry is {primary or 'not set'}, not on {failed}"
    if topo.cluster(target).schema_registry is None:
        return f"cluster {target} has no schema registry"
    return None


def hand_back(access: ClusterAccess, restored: str, serving: str) -> RegistryMove:
    """Failback: when the primary registry is on the restored cluster, the serving cluster's registry first follows
    the restored store and loses leader eligibility, then the restored registry leads on its own store again (the
    reverse of `take_over`, never two leaders), and a probe through the serving registry shows one leader; else why
    nothing was done."""
    topo = access.topology
    primary = topo.schema_registry_primary
    if primary != restored:
        return RegistryMove(skipped=f"the primary registry is {primary or 'not set'}, not on {restored}")
    store_id = store_cluster_id(access.config(restored))
    if topo.cluster(serving).schema_registry is None:
        return RegistryMove(primary=redirect(access, primary, primary, leader_eligible=True, store_id=store_id))
    follower = redirect(access, serving, primary, leader_eligible=False, store_id=store_id)
    return RegistryMove(
        primary=redirect(access, primary, primary, leader_eligible=True, store_id=store_id),
        follower=follower,
        one_leader=OneLeader(serving, writes_through(access, serving, primary)),
    )
