"""When dr_replication_health proposes a disaster failover (docs/design.md "Safety of the red button"): a cluster
that `dr.propose_failover_after` runs in a row could not reach. The proposal is a dr_failover run that waits at its
`approve` task with its preview ready; nobody is woken to compute a plan.

An outage is counted across runs in STATE_DIR/health/outages.json. The proposal's run id names the cluster and the
first run of its outage, so one outage makes one proposal however many runs see it (Airflow refuses a second run
with that id, and the proposing task then skips).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..state import locked, subdir, write_json
from ..topology import Topology

PROPOSED_BY = "dr_replication_health"  # conf `proposed_by` of a proposal: who started the run, in its report


@dataclass(frozen=True)
class Outage:
    """Runs in a row that could not reach `cluster`, the first of them at `since` (ISO, UTC)."""

    cluster: str
    since: str
    runs: int


@dataclass(frozen=True)
class Proposal:
    """A disaster failover of `cluster` into `target`: the dr_failover run's id and conf."""

    cluster: str
    target: str
    run_id: str
    conf: dict[str, Any]


def cluster_reachability(topology: Topology, unreachable_by_flow: Mapping[str, str | None]) -> dict[str, bool]:
    """Each cluster a checked flow touches: reachable unless a flow's check named it unreachable
    (`unreachable_by_flow`: flow name -> the cluster its check could not reach, or None). A cluster no checked flow
    touches is left out: not known either way."""
    reachable: dict[str, bool] = {}
    for flow in topology.flows:
        if flow.name in unreachable_by_flow:
            for cluster in (flow.source, flow.target):
                reachable[cluster] = reachable.get(cluster, True) and unreachable_by_flow[flow.name] != cluster
    return dict(sorted(reachable.items()))


def next_outages(previous: Mapping[str, Outage], reachable: Mapping[str, bool], now: str) -> dict[str, Outage]:
    """The outages after this run: an unreachable cluster's one run longer (a new one from `now`); a reachable one's
    over; a cluster this run did not see keeps its count."""
    outages = {c: o for c, o in previous.items() if c not in reachable}
    for cluster, up in reachable.items():
        if not up:
            before = previous.get(cluster)
            outages[cluster] = Outage(cluster, before.since if before else now, (before.runs if before else 0) + 1)
    return dict(sorted(outages.items()))


def proposals(
    outages: Mapping[str, Outage], topology: Topology, topology_path: str, failed_over: Collection[str] = ()
) -> tuple[list[Proposal], list[str]]:
    """The failovers to propose (an outage of `dr.propose_failover_after` runs or more; 0: never), and one line for
    each outage that long that cannot be proposed: its cluster must replicate into exactly one other cluster, the
    failover's target, and not be failed over from already (`failed_over`: its failback is pending, kafka_dr.roles)."""
    after = topology.dr.propose_failover_after
    made, refused = [], []
    for outage in outages.values():
        if after == 0 or outage.runs < after:
            continue
        if outage.cluster in failed_over:
            refused.append(f"{outage.cluster} unreachable in {outage.runs} runs: failed over already, failback pending")
            continue
        targets = sorted({f.target for f in topology.flows if f.source == outage.cluster})
        if len(targets) != 1:
            refused.append(
                f"{outage.cluster} unreachable in {outage.runs} runs, no failover proposed: its flows go to "
                f"{', '.join(targets) or 'no cluster'}, not to exactly one"
            )
            continue
        since = datetime.fromisoformat(outage.since).astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
        conf = {
            "topology": topology_path,
            "failed_cluster": outage.cluster,
            "target_cluster": targets[0],
            "mode": "disaster",
            "groups": ".*",
            "dry_run": False,
            "reset_to_datetime": None,
            "proposed_by": PROPOSED_BY,
        }
        made.append(Proposal(outage.cluster, targets[0], f"proposed__{outage.cluster}__{since}", conf))
    return made, refused


def record_run(reachable: Mapping[str, bool], now: str, path: Path | None = None) -> dict[str, Outage]:
    """Count this run into the outages kept in `path` (default STATE_DIR/health/outages.json); returns them."""
    path = path or subdir("health") / "outages.json"
    with locked(path):
        try:
            kept = {c: Outage(**o) for c, o in json.loads(path.read_text(encoding="utf-8")).items()}
        except FileNotFoundError:
            kept = {}
        outages = next_outages(kept, reachable, now)
        write_json(path, {c: asdict(o) for c, o in outages.items()})
    return outages
