"""Stopping the replication from and into a failed cluster, wherever its replicators run."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from confluent_kafka import KafkaException

from ..access import ClusterAccess
from ..clients import error_text
from ..replication import liveness
from ..replication.replicators import ReplicatorError
from ..reports import Step
from ..topology import Topology
from .plan import FailoverPlan

PLANNED_STOP_S = 30.0  # a replicator ends its epoch and commits what it copied
DISASTER_STOP_S = 5.0


@dataclass(frozen=True)
class Stopped:
    """A stop step's result: per flow, what became of its replicator (`stop_replication`'s words); `step`: when its
    task ran."""

    replicators: dict[str, str]
    step: Step | None = None


def stop_replication(plan: FailoverPlan, access: ClusterAccess, flows: Sequence[str] | None = None) -> dict[str, str]:
    """Stop the replicators of every flow from or into the failed cluster (liveness.stop: a signal where one was
    started here, a stop request through its target elsewhere); per flow, "stopped", "not running", or in a disaster
    "stop requested" when a replicator elsewhere did not acknowledge in time (the outcome check then watches its
    target) or when its target is the lost cluster (the request goes through its source, so that it does not copy
    once that cluster is back); a disaster's requests name the lost cluster, so a replicator whose source it is
    ends without waiting on it; a disaster's failed cluster is not asked. Local replicators get SIGKILL after
    DISASTER_STOP_S rather than 30 s (their open transactions abort, and the writer slots fence whatever survives),
    which is that much less RTO. The flows
    stop side by side, so the wait is one replicator's, not their sum. `flows`: only these of the plan's (a planned
    failover stops the flows into the failed cluster first: `inbound_flows`). Raises ReplicatorError with one line
    (once every stop has been tried)."""
    disaster = plan.mode == "disaster"
    timeout = DISASTER_STOP_S if disaster else PLANNED_STOP_S
    topo = access.topology

    def one(flow: str) -> str:
        target, source = topo.flow(flow).target, topo.flow(flow).source
        lost = disaster and target == plan.failed
        config = None if lost else access.config(target)
        through_source = access.config(source) if lost else None
        try:
            return liveness.stop(flow, config, timeout, through_source, lost=plan.failed if disaster else None)
        except KafkaException as exc:
            raise ReplicatorError(f"flow {flow}: its target {target} does not answer: {error_text(exc)}") from None
        except ReplicatorError:
            if disaster:
                return "stop requested"
            raise

    chosen = plan.stop_flows if flows is None else [f for f in plan.stop_flows if f in flows]
    with ThreadPoolExecutor(max_workers=max(1, len(chosen))) as pool:
        stopping = {flow: pool.submit(one, flow) for flow in chosen}
    # The pool has waited for every stop; a failure is raised only now (map would cancel the stops not yet begun).
    return {flow: future.result() for flow, future in stopping.items()}


def inbound_flows(plan: FailoverPlan, topo: Topology) -> list[str]:
    """The flows into the failed cluster. A planned failover stops them once producers write to the target: their
    copies of the target's new records into the failed cluster would otherwise keep arriving in its topics (active-
    active on one topic name), and the flows failed -> target, which must pass over each copy, never reach lag 0."""
    return [flow for flow in plan.stop_flows if topo.flow(flow).target == plan.failed]
