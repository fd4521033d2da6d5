"""A drill's params checked against the topology before anything changes: one line naming what is wrong."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..runbooks import see_runbook
from ..topology import DRILL_TOPIC, Topology

SCENARIOS = ("planned_round_trip", "disaster_round_trip")
APPROVALS = ("as_topology", "skip")
MAX_RATE = 1000.0  # records/s: a probe, not a load test
INNER_RUNS = {"failover": "dr_failover", "failback": "dr_failback"}  # the drill's switches: step -> DAG


def inner_run_id(drill_run_id: str, step: str) -> str:
    """The run id of a drill's `failover` or `failback` run: known before it is triggered, so the evidence, a script
    approving it and a retried trigger task all find it."""
    return f"drill__{drill_run_id}__{step}"


class DrillError(ValueError):
    """A drill that cannot run as asked; one line naming the param or the topology key."""


@dataclass(frozen=True)
class DrillPlan:
    scenario: str
    from_cluster: str  # the DC the drill fails over from (and back to)
    to_cluster: str
    probe_topic: str
    rate: float
    approval: str  # as_topology: each inner run asks as the topology says; skip: the drill's own approval stands
    producer_alias: str  # the topology's client aliases the probe follows (homed on from_cluster)
    consumer_alias: str
    flows: tuple[str, ...]  # the flows from_cluster -> to_cluster

    @property
    def disaster(self) -> bool:
        return self.scenario == "disaster_round_trip"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def plan_drill(topology: Topology, params: dict[str, Any]) -> DrillPlan:
    """The drill `params` ask for, or DrillError: both clusters known and distinct, a flow from one to the other
    and one back (the failback resyncs through it), the probe topic copied by both, client aliases on from_cluster
    for the probe's producer and consumer, a rate in (0, MAX_RATE]."""
    scenario = params.get("scenario")
    if scenario not in SCENARIOS:
        raise DrillError(f"scenario must be one of {', '.join(SCENARIOS)}, got {scenario!r}")
    source, target = params.get("from_cluster"), params.get("to_cluster")
    for name, value in (("from_cluster", source), ("to_cluster", target)):
        if value not in topology.clusters:
            raise DrillError(
                f"{name} must be a cluster of the topology ({', '.join(topology.clusters)}), got {value!r}"
            )
    if source == target:
        raise DrillError(f"from_cluster and to_cluster are both {source!r}: a drill moves to another cluster")
    assert isinstance(source, str) and isinstance(target, str)
    topic = params.get("probe_topic") or DRILL_TOPIC
    out = [f for f in topology.flows if f.source == source and f.target == target and f.copies_data(topic)]
    back = [f for f in topology.flows if f.source == target and f.target == source and f.copies_data(topic)]
    if not out or not back:
        missing = f"{source} -> {target}" if not out else f"{target} -> {source}"
        raise DrillError(
            f"no flow {missing} copies the probe topic {topic!r}: a round trip needs one each way; "
            + see_runbook("dr_drill", "the-topology-cannot-run-this-drill")
        )
    rate = params.get("rate", 20)
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 < rate <= MAX_RATE:
        raise DrillError(f"rate must be records per second in (0, {MAX_RATE:g}], got {rate!r}")
    approval = params.get("approval", "as_topology")
    if approval not in APPROVALS:
        raise DrillError(f"approval must be one of {', '.join(APPROVALS)}, got {approval!r}")
    homed = {name: alias for name, alias in topology.clients.items() if alias.cluster == source}
    producer = next((n for n, a in sorted(homed.items()) if a.role in ("producer", "both")), None)
    consumer = next((n for n, a in sorted(homed.items()) if a.role in ("consumer", "both")), None)
    if producer is None or consumer is None:
        role = "producer" if producer is None else "consumer"
        raise DrillError(
            f"no client alias with role {role} (or both) on {source} for the probe: add one to clients:; "
            + see_runbook("dr_drill", "the-topology-cannot-run-this-drill")
        )
    names = tuple(f.name for f in out)
    return DrillPlan(scenario, source, target, topic, float(rate), approval, producer, consumer, names)
