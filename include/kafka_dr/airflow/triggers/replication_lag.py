"""Trigger that waits in the triggerer until a flow's replication lag is within thresholds.

Lag is measured with kafka_dr.replication.lag in a thread (it uses blocking Kafka clients), so the
triggerer's event loop keeps serving other triggers and no worker slot is held while waiting.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent
from confluent_kafka import KafkaException

from ...clients import ClientConfigError
from ...replication import replicators
from ...replication.lag import FlowLag, LagError, check_thresholds, flow_lag
from ...replication.liveness import liveness
from ...topology import TopologyError, load_topology
from ..hooks.kafka_cluster import cluster_access


class ReplicationLagTrigger(BaseTrigger):
    """Fires once `flow` lags at most `max_records` records and `max_seconds` seconds in every partition.

    Events: {"status": "success", "lag", "reason"} when within thresholds; {"status": "timeout", "lag",
    "reason"} at `deadline` (epoch seconds); {"status": "error", "message"} when lag cannot be measured,
    or when `check_replicator` is set and the flow's replicator started here is no longer running (wherever it
    runs: liveness.py).
    """

    def __init__(
        self,
        *,
        flow: str,
        topology: str,
        max_records: int | None = None,
        max_seconds: float | None = None,
        topics: str | None = None,
        poke_interval: float = 10.0,
        deadline: float | None = None,
        lag_timeout: float = 10.0,
        check_replicator: bool = False,
    ) -> None:
        super().__init__()
        self.flow = flow
        self.topology = topology
        self.max_records = max_records
        self.max_seconds = max_seconds
        self.topics = topics
        self.poke_interval = poke_interval
        self.deadline = deadline
        self.lag_timeout = lag_timeout
        self.check_replicator = check_replicator

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "kafka_dr.airflow.triggers.replication_lag.ReplicationLagTrigger",
            {
                "flow": self.flow,
                "topology": self.topology,
                "max_records": self.max_records,
                "max_seconds": self.max_seconds,
                "topics": self.topics,
                "poke_interval": self.poke_interval,
                "deadline": self.deadline,
                "lag_timeout": self.lag_timeout,
                "check_replicator": self.check_replicator,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        while True:
            try:
                lag = await asyncio.to_thread(self.measure)
                ok, reason = check_thresholds(lag, self.max_records, self.max_seconds)
            except (LagError, TopologyError, ClientConfigError, ValueError, re.error) as exc:
                yield TriggerEvent({"status": "error", "flow": self.flow, "message": str(exc)})
                return
            if ok:
                yield TriggerEvent({"status": "success", "flow": self.flow, "reason": reason, "lag": lag.to_json()})
                return
            if self.check_replicator and (stopped := await asyncio.to_thread(self.replicator_stopped)):
                yield TriggerEvent({"status": "error", "flow": self.flow, "message": f"{reason}; {stopped}"})
                return
            if self.deadline is not None and time.time() >= self.deadline:
                yield TriggerEvent({"status": "timeout", "flow": self.flow, "reason": reason, "lag": lag.to_json()})
                return
            self.log.info("%s; next check in %g s", reason, self.poke_interval)
            await asyncio.sleep(self.poke_interval)

    def measure(self) -> FlowLag:
        """Settings come from the Airflow connections where the trigger runs, never from its kwargs
        (they are stored in the metadata database)."""
        access = cluster_access(load_topology(self.topology))
        return flow_lag(access, self.flow, topics=self.topics, timeout=self.lag_timeout)

    def replicator_stopped(self) -> str | None:
        """Why the flow's replicator, started by this host's DAGs, no longer runs; None while it runs, wherever
        (its target says so when it runs in another process namespace or host), or when none was started here."""
        if replicators.status(self.flow) is None:
            return None
        access = cluster_access(load_topology(self.topology))
        try:
            seen = liveness(self.flow, access.config(access.topology.flow(self.flow).target))
        except KafkaException:  # not known: the next lag measurement fails on the same target if it stays away
            return None
        return None if seen.running else seen.detail
