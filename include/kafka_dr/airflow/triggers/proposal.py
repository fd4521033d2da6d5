"""Trigger of a proposed failover's approval: waits for a person's answer, as Airflow's HITLTrigger does, and ends
the wait by itself once the cluster the proposal says is lost answers again.

dr_replication_health proposes a disaster failover after a cluster stayed unreachable (kafka_dr.health.proposal). If
the cluster comes back before anyone approves, the proposal must end with nothing changed, not wait for someone to
reject it: every PROBE_INTERVAL_S between the answers polled, the cluster is probed in a thread (blocking Kafka
client).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.providers.standard.triggers.hitl import HITLTrigger
from airflow.sdk.timezone import utcnow
from airflow.triggers.base import TriggerEvent

from ...clients import ClientConfigError
from ...topology import TopologyError, load_topology
from ..hooks.kafka_cluster import ClusterUnreachable, KafkaClusterHook

REACHABLE_AGAIN = "reachable_again"  # the event's error_type when the cluster answered again
PROBE_TIMEOUT_S = 5.0
PROBE_INTERVAL_S = 15.0  # a proposal may wait an hour: a probe a quarter of a minute, each one log line


class ProposalApprovalTrigger(HITLTrigger):
    """HITLTrigger's events (an answer, a timeout), and {"error": "<cluster> reachable again", "error_type":
    REACHABLE_AGAIN} when `cluster` of `topology` answers a metadata request before anyone answered.

    :param cluster: the cluster the proposed failover says is lost
    :param topology: the topology file that names it
    """

    def __init__(self, *, cluster: str, topology: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cluster = cluster
        self.topology = topology

    def serialize(self) -> tuple[str, dict[str, Any]]:
        _, kwargs = super().serialize()
        return (
            "kafka_dr.airflow.triggers.proposal.ProposalApprovalTrigger",
            {**kwargs, "cluster": self.cluster, "topology": self.topology},
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        probed = float("-inf")
        while True:
            if self.timeout_datetime and self.timeout_datetime < utcnow():
                yield await self._handle_timeout()
                return
            answered = await self._handle_response()
            if answered:
                yield answered
                return
            if time.monotonic() - probed >= PROBE_INTERVAL_S:
                probed = time.monotonic()
                if await asyncio.to_thread(self.reachable):
                    yield TriggerEvent({"error": f"{self.cluster} reachable again", "error_type": REACHABLE_AGAIN})
                    return
            await asyncio.sleep(self.poke_interval)

    def reachable(self) -> bool:
        """Whether the cluster answers now; a topology or connection that cannot be read counts as not reachable
        (the proposal then waits for a person, as any other approval)."""
        try:
            hook = KafkaClusterHook(self.cluster, topology=load_topology(self.topology))
            hook.check_reachable(PROBE_TIMEOUT_S, quiet=True)
        except (ClusterUnreachable, TopologyError, ClientConfigError) as exc:
            self.log.info("%s still unreachable: %s", self.cluster, exc)
            return False
        return True
