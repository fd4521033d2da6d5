"""The record of which DC serves after a failover (kafka_dr/roles.py): written by a failover, kept per cluster failed
over from, cleared by that cluster's failback; a file that does not parse hides nothing the health runs report."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.topology import write_topology

from kafka_dr import cli, readiness, roles
from kafka_dr.readiness import Finding
from kafka_dr.topology import load_topology

FLOWS = """\
  - {name: out, source: dc1, target: dc2, topics: {include: [orders]}}
  - {name: back, source: dc2, target: dc1, topics: {include: [returns]}}
  - {name: third, source: dc2, target: dc3, topics: {include: [orders]}}
"""


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def test_a_failover_is_pending_until_the_failback_of_its_cluster(tmp_path: Path, state_dir: Path) -> None:
    assert roles.pending() == {} and roles.failed_back("dc1") is None  # nothing failed over: nothing to clear
    lost = roles.failed_over("dc1", "dc2", "disaster", "manual__1", "2026-11-29T03:00:00+00:00")
    left = roles.failed_over("dc3", "dc2", "planned", "manual__2", "2026-11-29T04:00:00+00:00")
    assert roles.pending() == {"dc1": lost, "dc3": left}
    assert lost.line() == (
        f"dc1 lost (dr_failover run manual__1, started 2026-11-29T03:00:00+00:00); dc2 serves since "
        f"{lost.switched_at}; failback pending"
    )
    assert left.line().startswith("dc3 left by a planned failover (dr_failover run manual__2")
    clusters = {"dc1": "127.0.0.1:1", "dc2": "127.0.0.1:2", "dc3": "127.0.0.1:3"}
    topology = load_topology(write_topology(tmp_path / "t.yaml", clusters, FLOWS))
    assert roles.away_flows(topology, roles.pending()) == {"out", "back", "third"}
    assert roles.failed_back("dc1") == lost and roles.pending() == {"dc3": left}
    assert roles.away_flows(topology, roles.pending()) == {"third"}
    (state_dir / roles.FILE).write_text("{not json")
    assert roles.pending() == {}


def test_kafka_dr_status_says_who_serves_and_the_last_readiness_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["status"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "no failover pending: every cluster serves its own clients",
        "readiness: not checked yet (each dr_replication_health run checks it; `kafka-dr readiness` now)",
    ]
    lost = roles.failed_over("dc1", "dc2", "disaster", "manual__1", "2026-11-29T03:00:00+00:00")
    findings = [Finding("flows", True, "fine"), Finding("drill_age", False, "no dr_drill has passed")]
    readiness.save(findings, datetime(2026, 11, 29, 3, 5, tzinfo=UTC))
    assert cli.main(["status"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"failed over: {lost.line()}",
        "readiness at 2026-11-29T03:05:00+00:00: NOT READY (drill_age)",
    ]
    assert cli.main(["status", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["failed_over"] == [dataclasses.asdict(lost)] and shown["readiness"]["ready"] is False


def test_a_state_accepted_as_it_is_clears_the_failovers_of_that_run_only() -> None:
    drill = roles.failed_over("dc1", "dc2", "planned", "drill__d1__failover", "2026-11-29T03:00:00+00:00")
    other = roles.failed_over("dc3", "dc2", "disaster", "manual__2", "2026-11-29T04:00:00+00:00")
    assert roles.accepted("drill__d1__failover") == [drill] and roles.pending() == {"dc3": other}
