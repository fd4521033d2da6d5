"""When dr_replication_health proposes a disaster failover (kafka_dr/health/proposal.py), without a cluster: which
clusters a run reached, outages counted run after run, the proposal after `dr.propose_failover_after` runs (never
with 0), one run id per outage, and no proposal where the target is not one cluster or the cluster is failed over
from already."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafka_dr.health.proposal import (
    PROPOSED_BY,
    Outage,
    cluster_reachability,
    next_outages,
    proposals,
    record_run,
)
from kafka_dr.topology import Topology, parse_topology


def topology(dr: dict[str, Any] | None = None, extra_flow: dict[str, str] | None = None) -> Topology:
    flows = [
        {"name": "out", "source": "dc1", "target": "dc2", "topics": {"include": ["orders"]}},
        {"name": "back", "source": "dc2", "target": "dc1", "topics": {"include": ["returns"]}},
    ]
    clusters = {name: {"bootstrap_servers": f"{name}:9092"} for name in ("dc1", "dc2", "dc3")}
    return parse_topology({"clusters": clusters, "flows": flows + ([extra_flow] if extra_flow else []), "dr": dr or {}})


def test_a_cluster_is_reachable_unless_a_checked_flow_could_not_reach_it() -> None:
    topo = topology()
    assert cluster_reachability(topo, {"out": None, "back": None}) == {"dc1": True, "dc2": True}
    assert cluster_reachability(topo, {"out": "dc1", "back": None}) == {"dc1": False, "dc2": True}
    assert cluster_reachability(topo, {}) == {}  # no flow checked: nothing known, dc3 never


def test_an_outage_grows_run_after_run_and_ends_when_the_cluster_answers() -> None:
    first = next_outages({}, {"dc1": False, "dc2": True}, "2026-11-26T10:00:00+00:00")
    assert first == {"dc1": Outage("dc1", "2026-11-26T10:00:00+00:00", 1)}
    second = next_outages(first, {"dc1": False, "dc2": True}, "2026-11-26T10:05:00+00:00")
    assert second == {"dc1": Outage("dc1", "2026-11-26T10:00:00+00:00", 2)}
    assert next_outages(second, {"dc2": True}, "2026-11-26T10:10:00+00:00") == second  # dc1 not seen: kept
    assert next_outages(second, {"dc1": True}, "2026-11-26T10:10:00+00:00") == {}


def test_the_third_run_proposes_a_disaster_failover_to_the_target_of_the_clusters_flows() -> None:
    topo = topology()
    outage = Outage("dc1", "2026-11-26T10:00:00+00:00", 2)
    assert proposals({"dc1": outage}, topo, "t.yaml") == ([], [])
    [made], refused = proposals({"dc1": Outage("dc1", outage.since, 3)}, topo, "t.yaml")
    assert refused == []
    assert (made.cluster, made.target, made.run_id) == ("dc1", "dc2", "proposed__dc1__20261126T100000Z")
    assert made.conf == {
        "topology": "t.yaml",
        "failed_cluster": "dc1",
        "target_cluster": "dc2",
        "mode": "disaster",
        "groups": ".*",
        "dry_run": False,
        "reset_to_datetime": None,
        "proposed_by": PROPOSED_BY,
    }
    # The same outage a run later: the same run id, which Airflow refuses a second time.
    [again], _ = proposals({"dc1": Outage("dc1", outage.since, 4)}, topo, "t.yaml")
    assert again.run_id == made.run_id


def test_no_proposal_with_zero_runs_without_exactly_one_target_or_for_a_cluster_failed_over_from() -> None:
    long = {"dc1": Outage("dc1", "2026-11-26T10:00:00+00:00", 50)}
    assert proposals(long, topology({"propose_failover_after": 0}), "t.yaml") == ([], [])
    two_targets = topology(extra_flow={"name": "out3", "source": "dc1", "target": "dc3", "topics": {"include": ["x"]}})
    assert proposals(long, two_targets, "t.yaml") == (
        [],
        ["dc1 unreachable in 50 runs, no failover proposed: its flows go to dc2, dc3, not to exactly one"],
    )
    assert proposals(long, topology(), "t.yaml", failed_over={"dc1"}) == (
        [],
        ["dc1 unreachable in 50 runs: failed over already, failback pending"],
    )
    dc3 = {"dc3": Outage("dc3", "2026-11-26T10:00:00+00:00", 3)}
    assert proposals(dc3, topology(), "t.yaml")[1] == [
        "dc3 unreachable in 3 runs, no failover proposed: its flows go to no cluster, not to exactly one"
    ]


def test_runs_are_counted_in_a_file_that_outlives_them(tmp_path: Path) -> None:
    path = tmp_path / "outages.json"
    record_run({"dc1": False}, "2026-11-26T10:00:00+00:00", path)
    assert record_run({"dc1": False, "dc2": True}, "2026-11-26T10:05:00+00:00", path) == {
        "dc1": Outage("dc1", "2026-11-26T10:00:00+00:00", 2)
    }
    assert record_run({"dc1": True}, "2026-11-26T10:10:00+00:00", path) == {}
