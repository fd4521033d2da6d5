"""Stopping a failover's replicators (kafka_dr.failover.stop) with a fake liveness.stop: every flow from or into the
failed cluster at once, with the mode's timeout, the failed cluster never asked in a disaster (a flow into it is
asked through its source), and one flow's failure
raised only after every stop was tried (in a disaster, a replicator elsewhere that did not acknowledge is left to
verify_failover)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from kafka_dr.access import ClusterAccess
from kafka_dr.failover import stop
from kafka_dr.failover.plan import FailoverPlan
from kafka_dr.replication.replicators import ReplicatorError
from kafka_dr.topology import parse_topology

ACCESS = ClusterAccess(
    parse_topology(
        {
            "clusters": {"dc1": {"bootstrap_servers": "dc1:9092"}, "dc2": {"bootstrap_servers": "dc2:9092"}},
            "flows": [
                {"name": "out", "source": "dc1", "target": "dc2", "topics": {"include": ["t"]}},
                {"name": "back", "source": "dc2", "target": "dc1", "topics": {"include": ["t"]}},
            ],
        }
    )
)


def plan(mode: str) -> FailoverPlan:
    return FailoverPlan("t.yaml", "dc1", "dc2", mode, ".*", flows=("out",), stop_flows=("out", "back"))


def test_the_flows_stop_side_by_side_with_the_modes_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    both_stopping = threading.Barrier(2, timeout=5)  # broken unless the two stops are under way together
    calls = []

    def fake_stop(
        flow: str, config: dict[str, Any] | None, timeout: float, source: dict[str, Any] | None, lost: str | None
    ) -> str:
        servers = [None if c is None else c["bootstrap.servers"] for c in (config, source)]
        calls.append((flow, *servers, timeout, lost))
        both_stopping.wait()
        return "stop requested" if flow == "back" else "stopped"

    monkeypatch.setattr(stop.liveness, "stop", fake_stop)
    assert stop.stop_replication(plan("disaster"), ACCESS) == {"out": "stopped", "back": "stop requested"}
    # dc1 is lost: "back" (into dc1) is asked through its source, dc2; "out" through its target, dc2; both requests
    # name dc1, so that "out", whose source it is, does not wait on it as it ends.
    assert sorted(calls) == [
        ("back", None, "dc2:9092", stop.DISASTER_STOP_S, "dc1"),
        ("out", "dc2:9092", None, stop.DISASTER_STOP_S, "dc1"),
    ]
    calls.clear()
    stop.stop_replication(plan("planned"), ACCESS)
    assert sorted(calls) == [
        ("back", "dc1:9092", None, stop.PLANNED_STOP_S, None),
        ("out", "dc2:9092", None, stop.PLANNED_STOP_S, None),
    ]


def test_a_stop_that_fails_is_raised_after_the_others_were_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    tried = []
    failures: dict[str, Exception] = {
        "out": ReplicatorError("flow out: its replicator did not acknowledge stop request 5e1f within 30 s"),
        "back": KafkaException(KafkaError(KafkaError._TRANSPORT, "dc1:9092: Connection refused")),
    }

    def fake_stop(flow: str, config: dict[str, Any] | None, timeout: float, *_: Any, **__: Any) -> str:
        tried.append(flow)
        if flow in failures:
            raise failures[flow]
        return "stopped"

    monkeypatch.setattr(stop.liveness, "stop", fake_stop)
    with pytest.raises(ReplicatorError, match="flow out: its replicator did not acknowledge stop request 5e1f"):
        stop.stop_replication(plan("planned"), ACCESS)
    assert sorted(tried) == ["back", "out"]
    del failures["out"]
    with pytest.raises(ReplicatorError, match="^flow back: its target dc1 does not answer: dc1:9092: Connection ref"):
        stop.stop_replication(plan("planned"), ACCESS)
    failures = {"out": ReplicatorError("flow out: its replicator did not acknowledge stop request 5e1f within 5 s")}
    # A disaster does not ask the lost dc1; a replicator elsewhere that did not answer in time is verify's to judge.
    assert stop.stop_replication(plan("disaster"), ACCESS) == {"out": "stop requested", "back": "stopped"}
