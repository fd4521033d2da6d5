"""Reading each failed flow's lag for a failover's RPO (kafka_dr.failover.rpo.lag_readings) on fakes: measured with
the clusters' security settings when the source answers, the target's last snapshot when it does not, every flow at
once. The RPO arithmetic over readings is in test_report.py."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from support.lag import P0, lag_of
from support.topology import write_topology

from kafka_dr.access import ClusterAccess
from kafka_dr.failover import rpo
from kafka_dr.replication.lag import FlowLag, LagError, PartitionLag
from kafka_dr.topology import DRILL_TOPIC, HEARTBEATS_TOPIC, Topology, load_topology

SECURITY = {"dc1": {"sasl.username": "alice"}}


@pytest.fixture
def topo(tmp_path: Path) -> Topology:
    flows = """\
  - {name: up, source: dc1, target: dc2, topics: {include: ["a"]}}
  - {name: down, source: dc3, target: dc2, topics: {include: ["b"]}}
"""
    clusters = {"dc1": "127.0.0.1:1", "dc2": "127.0.0.1:2", "dc3": "127.0.0.1:3"}
    return load_topology(write_topology(tmp_path / "t.yaml", clusters, flows))


def test_each_flow_is_measured_with_the_security_settings_or_read_from_its_snapshot(
    topo: Topology, monkeypatch: pytest.MonkeyPatch
) -> None:
    both_reading = threading.Barrier(2, timeout=5)  # broken unless the two flows are read at the same time
    measured: list[tuple[str, Any]] = []
    lag = FlowLag("up", "dc1", "dc2", (), None, 1_000)
    snapshot = FlowLag("down", "dc3", "dc2", (), None, 500)

    def fake_flow_lag(access: ClusterAccess, name: str, *, timeout: float) -> FlowLag:
        measured.append((name, access.security))
        both_reading.wait()
        if name == "down":
            raise LagError("flow down: cluster dc3 is not reachable")
        return lag

    monkeypatch.setattr(rpo, "flow_lag", fake_flow_lag)
    monkeypatch.setattr(
        rpo, "load_snapshot", lambda target, name: snapshot if target["bootstrap.servers"] == "127.0.0.1:2" else None
    )
    readings = rpo.lag_readings(ClusterAccess(topo, SECURITY), ["up", "down"])
    assert readings == {"up": rpo.LagReading(lag, exact=True), "down": rpo.LagReading(snapshot, exact=False)}
    assert sorted(measured) == [("down", SECURITY), ("up", SECURITY)]


def test_the_rpo_counts_the_drills_probe_records_but_no_other_kdr_topic() -> None:
    """The probe stands in for an application (a drill's RPO is its records); heartbeats, bookkeeping are not data."""
    probe = PartitionLag(DRILL_TOPIC, 0, DRILL_TOPIC, 10, 13, 3, 0.5)
    heartbeats = PartitionLag(HEARTBEATS_TOPIC, 0, HEARTBEATS_TOPIC, 10, 40, 30, 0.5)
    assert rpo.behind(lag_of(P0, probe, heartbeats)) == {"topic1": 40, DRILL_TOPIC: 3}
