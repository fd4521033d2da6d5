"""A failover's RPO: the records committed in the failed cluster but not replicated, from each failed flow's lag."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..access import ClusterAccess
from ..replication.lag import FlowLag, LagError, flow_lag, load_snapshot
from ..topology import is_data_topic

LAG_TIMEOUT_S = 5.0  # how long a failed flow's source has to answer before its last snapshot stands in


@dataclass(frozen=True)
class LagReading:
    """One flow's lag when the report is written: measured from the source now (`exact`), else the last
    snapshot kept in the target (an estimate as of its time); `lag` is None when there is neither."""

    lag: FlowLag | None
    exact: bool


def lag_readings(access: ClusterAccess, flows: Iterable[str], measure: bool = True) -> dict[str, LagReading]:
    """Each flow's lag for the RPO: measured now when the source answers (exact), else the last lag snapshot kept
    in the target (an estimate as of its time). The flows are read side by side: a failed source costs its time-out
    once, not once per flow. Without `measure`, the snapshots alone (a source declared lost is not waited for)."""

    def reading(name: str, target: dict[str, Any]) -> LagReading:
        if not measure:
            return LagReading(load_snapshot(target, name), exact=False)
        try:
            return LagReading(flow_lag(access, name, timeout=LAG_TIMEOUT_S), exact=True)
        except LagError:
            return LagReading(load_snapshot(target, name), exact=False)

    names = list(flows)
    targets = {name: access.config(access.topology.flow(name).target) for name in names}
    with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
        readings = {name: pool.submit(reading, name, targets[name]) for name in names}
    return {name: future.result() for name, future in readings.items()}


def behind(lag: FlowLag) -> dict[str, int]:
    """Records of the flow's source not yet replicated, per topic, kafka-dr's own topics but the drill's left out."""
    per_topic: dict[str, int] = {}
    for partition in lag.partitions:
        if is_data_topic(partition.topic):
            per_topic[partition.topic] = per_topic.get(partition.topic, 0) + partition.lag_records
    return per_topic


def rpo(readings: Mapping[str, LagReading]) -> dict[str, Any]:
    """Records committed in the failed cluster but not replicated, per topic, kafka-dr's own topics left out.
    The total is unknown (None) when a flow has no reading at all, and exact only when every flow was measured
    from its source."""
    per_topic: dict[str, int] = {}
    sources: dict[str, dict[str, Any]] = {}
    for name, reading in readings.items():
        if reading.lag is None:
            sources[name] = {"exact": False, "measured_at_ms": None, "note": "source unreachable and no snapshot"}
            continue
        sources[name] = {"exact": reading.exact, "measured_at_ms": reading.lag.measured_at_ms}
        for topic, records in behind(reading.lag).items():
            per_topic[topic] = per_topic.get(topic, 0) + records
    known = all(s["measured_at_ms"] is not None for s in sources.values())
    return {
        "records": sum(per_topic.values()) if known else None,
        "per_topic": per_topic,
        "exact": known and all(s["exact"] for s in sources.values()),
        "flows": sources,
    }
