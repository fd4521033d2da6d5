"""The drill's evidence assembled from its steps' results (kafka_dr/drill/report.py), without Airflow or a cluster:
the inner runs' reports read from the state dir, the timeline, the probe's figures, the verdict and its first failure,
and a drill whose params were refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kafka_dr.access import ClusterAccess
from kafka_dr.drill import report
from kafka_dr.drill.plan import inner_run_id, plan_drill
from kafka_dr.drill.report import NOT_STARTED, RunFacts, StepResults, conclude
from kafka_dr.drill.run import DrillRun
from kafka_dr.state import report_path
from kafka_dr.topology import Topology, parse_topology

RUN_ID = "manual__2026-11-27T14:00:00+00:00"
PARAMS = {"scenario": "disaster_round_trip", "from_cluster": "dc1", "to_cluster": "dc2", "approval": "skip"}
TOPOLOGY = parse_topology(
    {
        "clusters": {"dc1": {"bootstrap_servers": "127.0.0.1:1"}, "dc2": {"bootstrap_servers": "127.0.0.1:2"}},
        "flows": [
            {"name": "out", "source": "dc1", "target": "dc2", "topics": {"include": ["orders", "_kdr.drill"]}},
            {"name": "back", "source": "dc2", "target": "dc1", "topics": {"include": ["orders", "_kdr.drill"]}},
        ],
        "clients": {"app": {"cluster": "dc1", "role": "both"}},
        "dr": {"rpo_records": 100, "rto_seconds": 60, "cut_off_command": "true", "bring_back_command": "true"},
    }
)
COUNTS = {"produced": 50, "delivered": 50, "lost": 0, "duplicated": 0, "refused": 0, "unacknowledged": 0}


def at(second: int) -> dict[str, Any]:
    return {"step": {"started": f"2026-11-27T14:00:{second:02d}.000+00:00", "ended": "-"}}


STEPS = StepResults(
    validated=at(0),
    opened=at(1),
    health_before={"flows": {"out": "OK", "back": "OK"}, "passed": True, "problems": {}, **at(2)},
    approved={"approved_by": "approver", **at(3)},
    probe={"run": "ab12", "group": "kdr-drill-probe-ab12", **at(4)},
    cut={"stopped": "stopped: dc1 broker", "behind": 7, **at(5)},
    caught_up={"unread_after_failover": 3, **at(20)},
    back={"started": "started: dc1 broker", **at(30)},
    stopped={"counts": COUNTS, "drained": True, **at(50)},
    health_after={"flows": {"out": "OK", "back": "WARN"}, "passed": True, "problems": {}, **at(55)},
)


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    ended: list[str] = []
    monkeypatch.setattr(report.ledger, "end", lambda run_id, topology: ended.append(run_id) or [])
    return tmp_path / "state"


def facts(**states: str) -> RunFacts:
    return RunFacts(RUN_ID, "admin", "2026-11-27T14:00:00.000+00:00", PARAMS, states, "http://airflow:8080")


def drill_run(tmp_path: Path, topology: Topology = TOPOLOGY) -> DrillRun:
    return DrillRun(plan_drill(topology, PARAMS), "/srv/topology.yaml", "9f2c" + "0" * 60, tmp_path / "run")


def write_inner_report(dag_id: str, step: str, second: int, body: dict[str, Any]) -> Path:
    path = report_path(dag_id, inner_run_id(RUN_ID, step))
    path.write_text(json.dumps({"run_started": f"2026-11-27T14:00:{second:02d}.000+00:00", **body}))
    return path


def test_a_drill_that_ran_every_step_passes_with_its_timeline_and_figures(state_dir: Path, tmp_path: Path) -> None:
    failover = write_inner_report(
        "dr_failover", "failover", 10, {"rpo": {"records": 12, "exact": False}, "rto_seconds": 11.2}
    )
    write_inner_report("dr_failback", "failback", 40, {"unreplicated": {"records": 9}, "rto_seconds": 38.5})
    evidence = conclude(
        facts(failover="success", failback="success"), drill_run(tmp_path), ClusterAccess(TOPOLOGY), STEPS
    )
    assert (evidence["passed"], evidence["failure"]) == (True, None)
    assert evidence["rpo"] == {"records": 9, "exact": True, "source": "dr_failback: unreplicated"}  # a disaster's
    assert (evidence["rto_seconds"], evidence["failback_rto_seconds"]) == (11.2, 38.5)
    assert evidence["runs"][0] == {
        "dag_id": "dr_failover",
        "run_id": inner_run_id(RUN_ID, "failover"),
        "state": "success",
        "url": f"http://airflow:8080/dags/dr_failover/runs/{inner_run_id(RUN_ID, 'failover')}",
        "report_file": str(failover),
        "rpo_records": 12,
        "rto_seconds": 11.2,
        "triggered_by": None,
        "approved_by": None,
    }
    assert [(e["step"], e["detail"]) for e in evidence["timeline"]] == [
        ("params and topology checked", ""),
        ("the state to put back recorded", ""),
        ("flows healthy", "out OK, back OK"),
        ("approved", "by approver"),
        ("probe producing and consuming", ""),
        ("DC cut off", "stopped: dc1 broker"),
        ("dr_failover", "success: RPO 12, RTO 11.2 s"),
        ("probe reads the target", ""),
        ("DC back", "started: dc1 broker"),
        ("dr_failback", "success: RPO 9, RTO 38.5 s"),
        ("probe stopped and counted", ""),
        ("flows checked", "out OK, back WARN"),
    ]
    assert evidence["probe"] == {**COUNTS, "behind_at_cut": 7, "unread_after_failover": 3}
    assert evidence["health_before"] == {"flows": {"out": "OK", "back": "OK"}, "passed": True}
    assert (evidence["scenario"], evidence["approval"], evidence["probe_topic"]) == (
        "disaster_round_trip",
        "skip",
        "_kdr.drill",
    )
    assert (evidence["topology_file"], evidence["triggered_by"]) == ("/srv/topology.yaml", "admin")
    assert all(check["passed"] for check in evidence["checks"]) and evidence["left"] == []


def test_a_steps_own_failure_comes_before_the_checks_it_made_fail(state_dir: Path, tmp_path: Path) -> None:
    """The probe that never started leaves no counts and no inner run: the evidence names the probe's error."""
    run = drill_run(tmp_path)
    run.record_failure("start_probe", "the probe exited with 1 at its start: boom")
    run.record_failure("drill_report", "a later line")
    steps = StepResults(validated=at(0), opened=at(1), health_before=STEPS.health_before)
    evidence = conclude(facts(), run, ClusterAccess(TOPOLOGY), steps)
    assert evidence["passed"] is False
    assert evidence["failure"] == "start_probe: the probe exited with 1 at its start: boom"
    assert evidence["probe"] is None and evidence["runs"] == []
    assert [c["check"] for c in evidence["checks"] if not c["passed"]][:2] == [
        "failover and failback succeeded",
        "probe delivered once",
    ]


def test_without_a_step_failure_the_first_failed_check_is_the_verdict(state_dir: Path, tmp_path: Path) -> None:
    write_inner_report("dr_failover", "failover", 10, {"rpo": {"records": 0, "exact": True}, "rto_seconds": 75.0})
    write_inner_report("dr_failback", "failback", 40, {"unreplicated": {"records": 0}, "rto_seconds": 38.5})
    evidence = conclude(
        facts(failover="success", failback="success"), drill_run(tmp_path), ClusterAccess(TOPOLOGY), STEPS
    )
    assert evidence["failure"] == "RTO objective missed: 75 s > 60 s (dr.rto_seconds)"


def test_a_drill_whose_params_were_refused_says_it_did_not_start(state_dir: Path) -> None:
    evidence = conclude(facts(), None, None, StepResults())
    assert (evidence["passed"], evidence["failure"]) == (False, NOT_STARTED)
    assert (evidence["topology_file"], evidence["topology_sha256"], evidence["probe_topic"]) == (None, None, None)
    assert evidence["timeline"] == [] and evidence["left"] == [] and evidence["probe"] is None
    assert evidence["objectives"]["rpo_records"]["objective"] is None  # no topology: no objective
