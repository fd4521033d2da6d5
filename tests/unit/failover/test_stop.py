"""Stopping a failover's replicators (kafka_dr.failover.stop) on a fake tracker: every flow from or into the failed
cluster at once, with the mode's timeout, and one flow's failure raised only after every stop was tried."""

from __future__ import annotations

import threading

import pytest

from kafka_dr.failover import stop
from kafka_dr.failover.plan import FailoverPlan
from kafka_dr.replication.replicators import ReplicatorError


def plan(mode: str) -> FailoverPlan:
    return FailoverPlan("t.yaml", "dc1", "dc2", mode, ".*", flows=("out",), stop_flows=("out", "back"))


def test_the_flows_stop_side_by_side_with_the_modes_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    both_stopping = threading.Barrier(2, timeout=5)  # broken unless the two stops are under way together
    calls = []

    def fake_stop(flow: str, timeout: float) -> object | None:
        calls.append((flow, timeout))
        both_stopping.wait()
        return None if flow == "back" else object()

    monkeypatch.setattr(stop.replicators, "stop", fake_stop)
    assert stop.stop_replication(plan("disaster")) == {"out": "stopped", "back": "not running"}
    assert sorted(calls) == [("back", stop.DISASTER_STOP_S), ("out", stop.DISASTER_STOP_S)]
    calls.clear()
    stop.stop_replication(plan("planned"))
    assert sorted(calls) == [("back", stop.PLANNED_STOP_S), ("out", stop.PLANNED_STOP_S)]


def test_a_stop_that_fails_is_raised_after_the_others_were_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    tried = []

    def fake_stop(flow: str, timeout: float) -> object:
        tried.append(flow)
        if flow == "out":
            raise ReplicatorError("flow out: replicator pid 7 did not stop (pids 7 still alive)")
        return object()

    monkeypatch.setattr(stop.replicators, "stop", fake_stop)
    with pytest.raises(ReplicatorError, match="flow out: replicator pid 7 did not stop"):
        stop.stop_replication(plan("disaster"))
    assert sorted(tried) == ["back", "out"]
