"""Readiness (kafka_dr/readiness.py): a ready deployment is ready on every check, and each condition that would stop
or slow a failover, made true one at a time, turns exactly its own check to NOT READY with a line naming it."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kafka_dr import readiness
from kafka_dr.readiness import Facts, evaluate
from kafka_dr.topology import parse_topology

NOW = datetime(2026, 11, 29, 3, 0, tzinfo=UTC)
READY_TOPOLOGY: dict[str, Any] = {
    "clusters": {
        "dc1": {"bootstrap_servers": "dc1:9092", "schema_registry": "http://dc1:8081"},
        "dc2": {"bootstrap_servers": "dc2:9092", "schema_registry": "http://dc2:8081"},
    },
    "flows": [{"name": "orders", "source": "dc1", "target": "dc2", "topics": {"include": ["orders", "_schemas"]}}],
    "schema_registry": {"primary": "dc1", "restart_command": "restart-registry {cluster}"},
    "clients": {"billing": {"cluster": "dc1"}},
    "dr": {"approvers": ["approver"], "rpo_records": 1000, "airflow_site": "dc3", "drill_max_age": "7d"},
}
READY_FACTS = Facts(
    now=NOW,
    paused_dags=frozenset({"some_other_dag"}),
    known_users=frozenset({"admin", "approver"}),
    flows_running={"orders": True},
    rpo_records={"orders": 12},
    registry_roles={"dc1": "leader", "dc2": "follower"},
    last_drill_passed=NOW - timedelta(days=3),
    drills_known=True,
    runnable=lambda program: program == "restart-registry",
)


def topology(**changes: Any) -> Any:
    raw = {**READY_TOPOLOGY, **changes}
    return parse_topology(raw)


def test_a_ready_deployment_is_ready_on_every_check() -> None:
    findings = evaluate(topology(), READY_FACTS)
    assert [f.check for f in findings if f.ready is not True] == [], [f.line() for f in findings]
    assert readiness.ready(findings)


NOT_READY = [
    ("dags_unpaused", {}, {"paused_dags": frozenset({"dr_failover"})}, "paused: dr_failover"),
    ("approvers", {"dr": {**READY_TOPOLOGY["dr"], "approvers": ["Alice Smith"]}}, {}, "no approver Airflow knows"),
    ("flows", {}, {"flows_running": {"orders": False}}, "orders not running"),
    ("flows", {}, {"rpo_records": {"orders": 5000}}, "would lose 5000 records, over dr.rpo_records 1000"),
    (
        "schema_registry",
        {"flows": [{"name": "orders", "source": "dc1", "target": "dc2", "topics": {"include": ["orders"]}}]},
        {},
        "_schemas of dc1 is copied by no flow into dc2",
    ),
    ("schema_registry", {}, {"registry_roles": {"dc1": "leader", "dc2": "leader"}}, "2 registries lead (dc1, dc2)"),
    ("schema_registry", {}, {"registry_roles": {"dc1": "follower", "dc2": "follower"}}, "no registry leads"),
    ("schema_registry", {}, {"registry_roles": {"dc1": "leader", "dc2": "unreachable"}}, "registry of dc2 does not"),
    ("commands", {}, {"runnable": lambda program: False}, "'restart-registry' not found"),
    ("client_aliases", {"clients": {}}, {}, "no client alias"),
    ("airflow_site", {"dr": {**READY_TOPOLOGY["dr"], "airflow_site": "dc1"}}, {}, "Airflow runs in dc1"),
    ("drill_age", {}, {"last_drill_passed": NOW - timedelta(days=8)}, "8 days old, over dr.drill_max_age"),
    ("drill_age", {}, {"last_drill_passed": None}, "no dr_drill has passed"),
]


@pytest.mark.parametrize(("check", "topology_changes", "fact_changes", "reason"), NOT_READY)
def test_each_condition_alone_turns_its_own_check_not_ready(
    check: str, topology_changes: dict[str, Any], fact_changes: dict[str, Any], reason: str
) -> None:
    findings = evaluate(topology(**topology_changes), dataclasses.replace(READY_FACTS, **fact_changes))
    assert [(f.check, reason in f.reason) for f in findings if f.ready is not True] == [(check, True)], [
        f.line() for f in findings
    ]
    (finding,) = [f for f in findings if f.check == check]
    assert finding.line().startswith(f"{check}: NOT READY: ")
    assert finding.line().endswith(f"(see docs/runbooks/readiness.md#{check.replace('_', '-')})")
    assert "\n" not in finding.line()
    assert not readiness.ready(findings)


def test_what_was_not_gathered_is_not_checked_and_not_ready() -> None:
    findings = evaluate(topology(dr={"approvers": ["approver"]}), Facts(now=NOW))
    unchecked = {f.check for f in findings if f.ready is None}
    assert unchecked == {"dags_unpaused", "approvers", "flows", "schema_registry", "airflow_site", "drill_age"}
    assert not readiness.ready(findings)


def test_the_drill_age_and_airflow_site_keys_are_checked_where_the_topology_is_read() -> None:
    with pytest.raises(ValueError, match="dr.drill_max_age: must be a duration"):
        topology(dr={"drill_max_age": "a month"})
    assert topology(dr={}).dr.drill_max_age_s == 31 * 86400


def test_the_findings_are_saved_for_the_dr_page_and_the_metrics(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path))
    assert readiness.load() is None  # no health run checked yet
    findings = evaluate(topology(), dataclasses.replace(READY_FACTS, paused_dags=frozenset({"dr_failback"})))
    saved = readiness.save(findings, NOW)
    assert readiness.load() == saved
    assert (saved["checked_at"], saved["ready"]) == ("2026-11-29T03:00:00+00:00", False)
    (paused,) = [f for f in saved["findings"] if not f["ready"]]
    assert paused == {
        "check": "dags_unpaused",
        "ready": False,
        "reason": "paused: dr_failback: a run triggered now would never start",
        "runbook": "docs/runbooks/readiness.md#dags-unpaused",
    }


def test_registries_that_do_not_say_their_role_leave_the_leader_unchecked() -> None:
    unknown = dataclasses.replace(READY_FACTS, registry_roles={"dc1": "unknown", "dc2": "unknown"})
    (finding,) = [f for f in evaluate(topology(), unknown) if f.check == "schema_registry"]
    assert finding.ready is None and finding.reason.endswith("the registries do not expose their roles"), finding


def test_the_flows_of_a_cluster_failed_over_from_wait_for_its_failback_and_are_said_once() -> None:
    topo = topology(
        flows=[
            *READY_TOPOLOGY["flows"],
            {"name": "back", "source": "dc2", "target": "dc1", "topics": {"include": ["x"]}},
        ]
    )
    facts = dataclasses.replace(READY_FACTS, failed_over=frozenset({"dc1"}), flows_running={"orders": False})
    (finding,) = [f for f in evaluate(topo, facts) if f.check == "flows"]
    assert finding.ready is True, finding
    assert (
        finding.reason
        == "0 flow(s) running within the RPO objective; failed over from dc1: 2 flow(s) wait for the failback"
    )
