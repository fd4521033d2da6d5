"""A drill's evidence as dr_drill writes it (kafka_dr.drill's docstring), for tests of what reads or renders it."""

from __future__ import annotations

import copy
from typing import Any

_PASSED: dict[str, Any] = {
    "dag_id": "dr_drill",
    "run_id": "manual__2026-11-27T14:00:00+00:00",
    "scenario": "disaster_round_trip",
    "from_cluster": "dc1",
    "to_cluster": "dc2",
    "probe_topic": "_kdr.drill",
    "rate": 20.0,
    "approval": "as_topology",
    "triggered_by": "admin",
    "started": "2026-11-27T14:00:00.000+00:00",
    "ended": "2026-11-27T14:03:10.000+00:00",
    "topology_file": "/srv/kafka-dr/topology.yaml",
    "topology_sha256": "9f2c" + "0" * 60,
    "runs": [
        {
            "dag_id": "dr_failover",
            "run_id": "drill__manual__2026-11-27T14:00:00+00:00__failover",
            "state": "success",
            "url": "http://127.0.0.1:8080/dags/dr_failover/runs/drill__manual__2026-11-27T14:00:00+00:00__failover",
            "report_file": "/srv/kafka-dr/state/reports/dr_failover-drill.json",
            "rpo_records": 7,
            "rto_seconds": 11.2,
            "approved_by": "approver",
        },
        {
            "dag_id": "dr_failback",
            "run_id": "drill__manual__2026-11-27T14:00:00+00:00__failback",
            "state": "success",
            "url": "http://127.0.0.1:8080/dags/dr_failback/runs/drill__manual__2026-11-27T14:00:00+00:00__failback",
            "report_file": "/srv/kafka-dr/state/reports/dr_failback-drill.json",
            "rpo_records": 0,
            "rto_seconds": 38.5,
            "approved_by": "approver",
        },
    ],
    "timeline": [
        {"at": "2026-11-27T14:00:01.000+00:00", "step": "health before", "detail": "2 flows OK"},
        {"at": "2026-11-27T14:00:05.000+00:00", "step": "probe started", "detail": "20 records/s to _kdr.drill"},
        {"at": "2026-11-27T14:00:20.000+00:00", "step": "dc1 cut off", "detail": "dc1 broker, dc1 registry stopped"},
        {"at": "2026-11-27T14:00:21.000+00:00", "step": "dr_failover", "detail": "success: RPO 7, RTO 11.2 s"},
        {"at": "2026-11-27T14:01:30.000+00:00", "step": "dc1 back", "detail": "dc1 broker, dc1 registry started"},
        {"at": "2026-11-27T14:02:40.000+00:00", "step": "dr_failback", "detail": "success: 0 unreplicated, RTO 38.5 s"},
        {"at": "2026-11-27T14:03:00.000+00:00", "step": "probe stopped", "detail": "3779 produced, 3779 delivered"},
        {"at": "2026-11-27T14:03:09.000+00:00", "step": "health after", "detail": "2 flows OK"},
    ],
    "rpo": {"records": 0, "exact": True, "source": "dr_failback: records that never left dc1"},
    "rto_seconds": 11.2,
    "failback_rto_seconds": 38.5,
    "objectives": {
        "rpo_records": {"objective": 1000, "measured": 0, "passed": True},
        "rto_seconds": {"objective": 60.0, "measured": 11.2, "passed": True},
    },
    "probe": {
        "produced": 3779,
        "delivered": 3779,
        "lost": 0,
        "duplicated": 0,
        "sent": 3779,
        "refused": 0,
        "unacknowledged": 0,
        "read_twice": 385,
    },
    "health_before": {"flows": {"dc1-to-dc2": "OK", "dc2-to-dc1": "OK"}, "passed": True},
    "health_after": {"flows": {"dc1-to-dc2": "OK", "dc2-to-dc1": "OK"}, "passed": True},
    "checks": [
        {"check": "probe delivered once", "passed": True, "detail": "3779 produced, 3779 delivered, 0 lost, 0 twice"},
        {"check": "RPO objective", "passed": True, "detail": "0 records <= 1000"},
        {"check": "RTO objective", "passed": True, "detail": "11.2 s <= 60 s"},
        {"check": "flows healthy after", "passed": True, "detail": "2 flows OK"},
        {"check": "put back as found", "passed": True, "detail": "aliases, replicators and registry as before"},
    ],
    "left": [],
    "passed": True,
    "failure": None,
}


def drill_evidence(**changes: Any) -> dict[str, Any]:
    """A passed disaster drill's evidence, with `changes` applied at the top level."""
    evidence = copy.deepcopy(_PASSED)
    evidence.update(changes)
    return evidence


def failed_drill_evidence() -> dict[str, Any]:
    """A planned drill that failed its RTO objective (the figure named)."""
    evidence = drill_evidence(
        scenario="planned_round_trip",
        run_id="manual__2026-11-28T09:00:00+00:00",
        started="2026-11-28T09:00:00.000+00:00",
        ended="2026-11-28T09:02:00.000+00:00",
        rto_seconds=21.0,
        passed=False,
        failure="RTO objective missed: 21.0 s > 0.5 s (dr.rto_seconds)",
    )
    evidence["objectives"]["rto_seconds"] = {"objective": 0.5, "measured": 21.0, "passed": False}
    evidence["checks"][2] = {"check": "RTO objective", "passed": False, "detail": "21.0 s > 0.5 s"}
    return evidence
