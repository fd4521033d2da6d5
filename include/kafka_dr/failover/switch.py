"""Moving a failover's client aliases: which move, and how a move is recorded (the report finds the producers a
planned failover moved first by it)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .. import client_switch
from ..reports import Step
from ..topology import Topology
from .plan import FailoverPlan

PRODUCERS = ("producer",)
EVERY_ROLE = ("producer", "consumer", "both")
WRITING_ROLES = ("producer", "both")  # aliases that may register schemas


@dataclass(frozen=True)
class Switched:
    """A switch step's result: the aliases it moved; `step`: when its task ran (the consumers' end ends the RTO)."""

    moved: tuple[str, ...]
    step: Step | None = None


def writers(topo: Topology) -> list[str]:
    """The aliases that produce (role producer or both): those a registry without a leader can fail."""
    return [alias.name for alias in topo.clients.values() if alias.role in WRITING_ROLES]


def move_reason(dag_id: str, run_id: str, mode: str, step: str) -> str:
    """How a client move of the run is recorded."""
    return f"{dag_id} {run_id} ({mode}, {step})"


def switch_clients(topo: Topology, plan: FailoverPlan, roles: Iterable[str], reason: str) -> list[str]:
    """Move the aliases of `roles` active on the failed cluster (at home in plan.home, when set) to the target;
    returns those moved."""
    aliases = clients_to_move(topo, plan, roles)
    return [m.alias for m in client_switch.switch(topo, aliases, plan.target, reason)]


def clients_to_move(topo: Topology, plan: FailoverPlan, roles: Iterable[str]) -> list[str]:
    """The aliases of `roles` active on the failed cluster (at home in plan.home, when set): those a switch moves."""
    roles = tuple(roles)
    return [s.alias for s in _on_failed(topo, plan) if s.role in roles]


def clients_left(topo: Topology, plan: FailoverPlan) -> list[str]:
    """The aliases still active on the failed cluster (at home in plan.home, when set)."""
    return [s.alias for s in _on_failed(topo, plan)]


def moved_by(reason: str) -> list[str]:
    """The aliases moves recorded with `reason` moved, in their order."""
    return [m.alias for m in client_switch.history() if m.reason == reason]


def _on_failed(topo: Topology, plan: FailoverPlan) -> list[client_switch.AliasState]:
    return [s for s in client_switch.states(topo) if s.active == plan.failed and plan.home in (None, s.home)]
