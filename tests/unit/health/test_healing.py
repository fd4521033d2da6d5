"""Self-healing (health/healing.py) on a fake replicator tracker: a dead continuous replicator is restarted, at most
RESTARTS_PER_HOUR times an hour, never over a problem that needs an operator, never one stopped on purpose."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_dr.access import ClusterAccess
from kafka_dr.health import healing
from kafka_dr.health.healing import RESTARTS_PER_HOUR, heal
from kafka_dr.health.rules import FlowHealth, PartitionStatus
from kafka_dr.replication.replicators import ReplicatorProcess
from kafka_dr.topology import parse_topology

FLOW = "dc1-to-dc2"
COMMAND = ("spark-submit", "replicate.py", "--flow", FLOW, "--continuous")
NOW = 1_800_000_000.0
ACCESS = ClusterAccess(
    parse_topology({"clusters": {"dc1": {"bootstrap_servers": "127.0.0.1:1"}}}), {"dc1": {"sasl.username": "alice"}}
)


class Tracker:
    """What healing asks of kafka_dr.replication.replicators: the flow's replicator, its last error, a start."""

    def __init__(self, replicator: ReplicatorProcess | None) -> None:
        self.replicator = replicator
        self.starts: list[tuple[str, tuple[str, ...], object]] = []

    def status(self, flow: str) -> ReplicatorProcess | None:
        return self.replicator

    def last_error(self, flow: str) -> str:
        return "error: broker dc1:9092 is down"

    def start(self, flow: str, command: tuple[str, ...], env: object = None) -> tuple[ReplicatorProcess, bool]:
        self.starts.append((flow, command, env))
        pid = 1000 + len(self.starts)
        self.replicator = ReplicatorProcess(
            flow, pid, command, "replicator.log", "2026-11-25T10:00:00+00:00", None, True
        )
        return self.replicator, True


def replicator(running: bool = False, stopped_at: str | None = None) -> ReplicatorProcess:
    return ReplicatorProcess(FLOW, 42, COMMAND, "replicator.log", "2026-11-25T09:00:00+00:00", stopped_at, running)


def stopped_flow(*statuses: str) -> FlowHealth:
    partitions = tuple(PartitionStatus("orders", i, s, 5, 1.0, "") for i, s in enumerate(statuses or ("STOP",)))
    return FlowHealth(FLOW, "ERR", ("replicator process gone",), partitions)


@pytest.fixture
def tracker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Tracker:
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    tracker = Tracker(replicator())
    monkeypatch.setattr(healing, "replicators", tracker)
    return tracker


def test_a_dead_replicator_is_restarted_with_its_command_and_the_reason(tracker: Tracker) -> None:
    action = heal(stopped_flow(), ACCESS, now=NOW)
    assert tracker.starts == [(FLOW, COMMAND, {"KDR_CLUSTER_DC1_CONFIG": '{"sasl.username": "alice"}'})]
    assert action == {
        "flow": FLOW,
        "action": "restarted",
        "reason": f"process 42 was gone (error: broker dc1:9092 is down); new pid 1001, "
        f"restart 1 of {RESTARTS_PER_HOUR} in the last hour",
    }


@pytest.mark.parametrize(
    "current",
    [None, replicator(running=True), replicator(stopped_at="2026-11-25T09:30:00+00:00")],
    ids=["never-started", "running", "stopped-on-purpose"],
)
def test_nothing_is_done_unless_a_replicator_that_should_run_is_gone(tracker: Tracker, current) -> None:
    tracker.replicator = current
    assert heal(stopped_flow(), ACCESS, now=NOW) is None and tracker.starts == []


def test_problems_that_need_an_operator_are_not_restarted_over(tracker: Tracker) -> None:
    action = heal(stopped_flow("STOP", "GAP", "OK", "CYCLE"), ACCESS, now=NOW)
    assert action == {
        "flow": FLOW,
        "action": "not restarted",
        "reason": "replicator dead, but CYCLE, GAP needs an operator",
    }
    assert tracker.starts == []


def test_restarts_stop_at_the_hourly_limit_and_older_ones_age_out(tracker: Tracker) -> None:
    for i in range(RESTARTS_PER_HOUR):
        assert heal(stopped_flow(), ACCESS, now=NOW + i)["action"] == "restarted"
        tracker.replicator = replicator()  # it died again
    refused = heal(stopped_flow(), ACCESS, now=NOW + 3599)
    assert refused == {
        "flow": FLOW,
        "action": "not restarted",
        "reason": f"{RESTARTS_PER_HOUR} restarts in the last hour (limit {RESTARTS_PER_HOUR}); "
        "last error: error: broker dc1:9092 is down",
    }
    assert len(tracker.starts) == RESTARTS_PER_HOUR
    again = heal(stopped_flow(), ACCESS, now=NOW + 3600)  # the first restart is an hour old
    assert again["action"] == "restarted" and again["reason"].endswith(
        f"restart {RESTARTS_PER_HOUR} of {RESTARTS_PER_HOUR} in the last hour"
    )


def test_the_restart_history_is_kept_per_flow(tracker: Tracker) -> None:
    for i in range(RESTARTS_PER_HOUR):
        heal(stopped_flow(), ACCESS, now=NOW + i)
        tracker.replicator = replicator()
    other = FlowHealth("dc2-to-dc1", "ERR", (), (PartitionStatus("orders", 0, "STOP", 5, 1.0, ""),))
    tracker.replicator = ReplicatorProcess("dc2-to-dc1", 7, COMMAND, "r.log", "2026-11-25T09:00:00+00:00", None, False)
    assert heal(other, ACCESS, now=NOW + 10)["action"] == "restarted"
