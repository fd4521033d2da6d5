"""DrApprovalOperator's decisions before it asks anyone, on small fakes of a task's context (no DAG run, no broker):
whether it asks at all, whom, for how long, and when a drill's approval stands for it. The asking itself, Airflow's
human-in-the-loop request, is replaced by a recorder; the answers through Airflow's REST API are the e2e tests'."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk.exceptions import AirflowSkipException
from support.topology import write_topology

from kafka_dr.airflow.operators.approval import OFFERED, DrApprovalOperator

OFFER = {"what": "failover dc1 -> dc2 (disaster)", "cluster": "dc1", "page": "# preview"}
DRILL = "manual__drill-1"


class Ti:
    """A task instance as the operator uses it: the preview's offer, XComs pushed, a drill run's state and result."""

    def __init__(self, drill_state: str | None = None) -> None:
        self.drill_state, self.pushed = drill_state, {}

    def xcom_pull(self, task_ids: str, key: str = "return_value", dag_id: str | None = None, run_id: str | None = None):
        if dag_id == "dr_drill":
            assert (task_ids, run_id) == ("approve", DRILL)
            return {"approved_by": "approver", "wait_seconds": 3.0}
        assert (task_ids, key) == ("preview", OFFERED)
        return OFFER

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value

    def get_dagrun_state(self, dag_id: str, run_id: str) -> str | None:
        assert (dag_id, run_id) == ("dr_drill", DRILL)
        return self.drill_state


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[DrApprovalOperator]:
    """The operators that went on to ask a person (Airflow's request recorded, not written)."""
    seen: list[DrApprovalOperator] = []
    monkeypatch.setattr(ApprovalOperator, "execute", lambda self, context: seen.append(self) or "asked")
    return seen


def run(tmp_path: Path, dr: str, conf: dict[str, Any] | None = None, ti: Ti | None = None) -> Any:
    topology = write_topology(tmp_path / "topology.yaml", {"dc1": "127.0.0.1:1", "dc2": "127.0.0.1:2"}, extra=dr)
    context = {
        "params": {"topology": str(topology)},
        "dag_run": SimpleNamespace(conf=conf or {}),
        "ti": ti or Ti(),
        "task_instance": SimpleNamespace(id="ti-1"),
        "dag": SimpleNamespace(dag_id="dr_failover"),
        "run_id": "manual__1",
    }
    return DrApprovalOperator(task_id="approve").execute(context)


def test_approval_none_skips_the_task_but_a_proposed_failover_still_asks(tmp_path: Path, asked: list) -> None:
    with pytest.raises(AirflowSkipException, match="dr.approval: none"):
        run(tmp_path, "dr: {approval: none}")
    assert asked == []
    # A proposal is health's, not a person's: it waits for one whatever dr.approval says.
    assert run(tmp_path, "dr: {approval: none}", {"proposed_by": "dr_replication_health"}) == "asked"
    assert len(asked) == 1


def test_only_the_topologys_approvers_are_assigned_and_the_wait_ends_at_its_timeout(
    tmp_path: Path, asked: list
) -> None:
    run(tmp_path, "dr: {approval: required, approvers: [approver, oncall], approval_timeout: 45m}")
    operator = asked[-1]
    assert operator.assigned_users == [{"id": "approver", "name": "approver"}, {"id": "oncall", "name": "oncall"}]
    assert operator.response_timeout == timedelta(minutes=45)
    run(tmp_path, "dr: {approval: required}")
    assert asked[-1].assigned_users is None  # no approvers listed: any user may answer


def test_a_drills_approval_stands_for_its_inner_run_only_while_the_drill_runs(tmp_path: Path, asked: list) -> None:
    conf = {"drill_run_id": DRILL, "drill_approval": "skip"}
    approved = run(tmp_path, "dr: {approval: required}", conf, Ti(drill_state="running"))
    assert approved["approved_by"] == f"approver (drill {DRILL})" and asked == []
    # A finished drill's approval is not inherited: a run cleared or triggered again later asks a person.
    for state in ("success", "failed"):
        assert run(tmp_path, "dr: {approval: required}", conf, Ti(drill_state=state)) == "asked"
    assert len(asked) == 2
