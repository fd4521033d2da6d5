"""Lag readings built by hand, for the rules and the table that read them."""

from __future__ import annotations

from kafka_dr.replication.lag import FlowLag, PartitionLag


def lag_of(*partitions: PartitionLag, heartbeat: float | None = 0.25) -> FlowLag:
    return FlowLag("dc1-to-dc2", "dc1", "dc2", partitions, heartbeat, 1_700_000_000_000)


P0 = PartitionLag("topic1", 0, "topic1", 100, 150, 40, 3.5)  # 10 of the 50 offsets are transaction markers
P1 = PartitionLag("topic2", 3, "topic2.replica", 0, 90_000, 90_000, 12.25, estimated=True)
IDLE = PartitionLag("topic1", 1, "topic1", 7, 7, 0, 0.0)
