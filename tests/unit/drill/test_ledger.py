"""The drill ledger's rules with the state it snapshots faked: one drill at a time, and none after a drill that left
production changed until that is put back or accepted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafka_dr.access import ClusterAccess
from kafka_dr.drill import ledger
from kafka_dr.topology import parse_topology

ACCESS = ClusterAccess(parse_topology({"clusters": {"dc1": {"bootstrap_servers": "127.0.0.1:1"}}}))
HOME = {"aliases": {"orders-producer": "dc1"}, "replicators": {"out": True}, "registries": {"dc1": "leader"}}
MOVED = {"aliases": {"orders-producer": "dc2"}, "replicators": {"out": False}, "registries": {"dc1": "leader"}}


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path))
    now: dict[str, Any] = {"state": HOME}
    monkeypatch.setattr(ledger, "snapshot", lambda _: now["state"])
    return now


def idle(_: str) -> bool:
    return False


def test_a_drill_that_put_everything_back_closes_its_record(state: dict[str, Any]) -> None:
    before, note = ledger.begin("drill-1", ACCESS, "planned_round_trip", idle)
    assert before == HOME and note is None and ledger.open_record()["run_id"] == "drill-1"
    assert ledger.begin("drill-1", ACCESS, "planned_round_trip", idle) == (HOME, None)  # a retried task
    assert ledger.end("drill-1", ACCESS) == [] and ledger.open_record() is None


def test_a_drill_that_left_changes_keeps_its_record_and_the_next_refuses_naming_them(state: dict[str, Any]) -> None:
    ledger.begin("drill-1", ACCESS, "planned_round_trip", idle)
    state["state"] = MOVED
    left = ["client alias orders-producer on dc2 (was dc1)", "flow out: its replicator is not running (it was)"]
    assert ledger.end("drill-1", ACCESS) == left
    assert ledger.open_record()["left"] == left
    with pytest.raises(ledger.DrillRefused) as refused:
        ledger.begin("drill-2", ACCESS, "planned_round_trip", idle)
    assert str(refused.value).startswith("drill drill-1 (started ")
    assert "left production changed: client alias orders-producer on dc2 (was dc1); flow out:" in str(refused.value)
    assert str(refused.value).endswith(
        "then start the drill again; see docs/runbooks/dr_drill.md#a-drill-left-production-changed"
    )
    assert ledger.open_record()["run_id"] == "drill-1"  # the refusal changed nothing
    # Once put back, the next drill goes on and says what it closed.
    state["state"] = HOME
    _, note = ledger.begin("drill-2", ACCESS, "planned_round_trip", idle)
    assert note == "drill drill-1 ended without closing; it left nothing changed"
    assert ledger.open_record()["run_id"] == "drill-2"


def test_one_drill_at_a_time(state: dict[str, Any]) -> None:
    ledger.begin("drill-1", ACCESS, "disaster_round_trip", idle)
    with pytest.raises(ledger.DrillRefused, match="drill drill-1 is running: one drill at a time"):
        ledger.begin("drill-2", ACCESS, "planned_round_trip", lambda run_id: run_id == "drill-1")


def test_resolve_closes_only_what_is_back_unless_accepted(state: dict[str, Any]) -> None:
    assert ledger.resolve(ACCESS, accept=False) == (None, [])
    ledger.begin("drill-1", ACCESS, "planned_round_trip", idle)
    state["state"] = MOVED
    record, left = ledger.resolve(ACCESS, accept=False)
    assert record is not None and len(left) == 2 and ledger.open_record() is not None
    record, left = ledger.resolve(ACCESS, accept=True)
    assert len(left) == 2 and ledger.open_record() is None
