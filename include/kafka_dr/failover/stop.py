"""Stopping the replication from and into a failed cluster."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from ..replication import replicators
from .plan import FailoverPlan

PLANNED_STOP_S = 30.0  # a replicator ends its epoch and commits what it copied
DISASTER_STOP_S = 5.0


def stop_replication(plan: FailoverPlan) -> dict[str, str]:
    """Stop the tracked replicators of every flow from or into the failed cluster; per flow, "stopped" or "not
    running". In a disaster they cannot end their epoch against a dead cluster: SIGKILL after DISASTER_STOP_S rather
    than 30 s (their open transactions abort, and the writer slots fence whatever survives), which is that much less
    RTO. The flows stop side by side, so the wait is one replicator's, not their sum. Raises
    replicators.ReplicatorError with one line (once every stop has been tried)."""
    timeout = DISASTER_STOP_S if plan.mode == "disaster" else PLANNED_STOP_S
    with ThreadPoolExecutor(max_workers=max(1, len(plan.stop_flows))) as pool:
        stopping = {flow: pool.submit(replicators.stop, flow, timeout=timeout) for flow in plan.stop_flows}
    # The pool has waited for every stop; a failure is raised only now (map would cancel the stops not yet begun).
    return {flow: "not running" if future.result() is None else "stopped" for flow, future in stopping.items()}
