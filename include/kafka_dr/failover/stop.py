"""Stopping the replication from and into a failed cluster."""

from __future__ import annotations

from ..replication import replicators
from .plan import FailoverPlan

PLANNED_STOP_S = 30.0  # a replicator ends its epoch and commits what it copied
DISASTER_STOP_S = 5.0


def stop_replication(plan: FailoverPlan) -> dict[str, str]:
    """Stop the tracked replicators of every flow from or into the failed cluster; per flow, "stopped" or "not
    running". In a disaster they cannot end their epoch against a dead cluster: SIGKILL after DISASTER_STOP_S rather
    than 30 s (their open transactions abort, and the writer slots fence whatever survives), which is that much less
    RTO. Raises replicators.ReplicatorError with one line."""
    timeout = DISASTER_STOP_S if plan.mode == "disaster" else PLANNED_STOP_S
    stopped = {}
    for flow in plan.stop_flows:
        final = replicators.stop(flow, timeout=timeout)
        stopped[flow] = "not running" if final is None else "stopped"
    return stopped
