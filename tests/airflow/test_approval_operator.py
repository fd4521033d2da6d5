"""DrApprovalOperator's decisions on small fakes of a task's context (no DAG run, no broker): before it asks anyone,
whether it asks at all, whom, for how long, and when a drill's approval stands for it; once answered, what a rejection
or the triggering user's own approval (four eyes) fails with, and what an approval hands the report. The asking
itself, Airflow's human-in-the-loop request, is replaced by a recorder; the answers through Airflow's REST API and the
UI, with nothing changed after a rejection, are tests/e2e/test_local_executor.py's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException
from support.topology import write_topology

from kafka_dr.airflow.operators.approval import OFFERED, REQUESTED_AT, DrApprovalOperator

OFFER = {"what": "failover dc1 -> dc2 (disaster)", "cluster": "dc1", "page": "# preview"}
DRILL = "manual__drill-1"
ASKED_AT = datetime(2026, 11, 28, 3, 0, tzinfo=UTC)


class Ti:
    """A task instance as the operator uses it: the preview's offer, XComs pushed, a drill run's state and result."""

    def __init__(self, drill_state: str | None = None) -> None:
        self.drill_state, self.pushed = drill_state, {}

    def xcom_pull(self, task_ids: str, key: str = "return_value", dag_id: str | None = None, run_id: str | None = None):
        if dag_id == "dr_drill":
            assert (task_ids, run_id) == ("approve", DRILL)
            return {"approved_by": "approver", "wait_seconds": 3.0}
        if key == REQUESTED_AT:
            assert task_ids == "approve"
            return ASKED_AT.isoformat()
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


def context(tmp_path: Path, dr: str, conf: dict[str, Any] | None = None, ti: Ti | None = None) -> dict[str, Any]:
    """A dr_failover run's context for `approve`, triggered by admin."""
    topology = write_topology(tmp_path / "topology.yaml", {"dc1": "127.0.0.1:1", "dc2": "127.0.0.1:2"}, extra=dr)
    return {
        "params": {"topology": str(topology)},
        "dag_run": SimpleNamespace(conf=conf or {}, triggering_user_name="admin"),
        "ti": ti or Ti(),
        "task_instance": SimpleNamespace(id="ti-1"),
        "dag": SimpleNamespace(dag_id="dr_failover"),
        "run_id": "manual__1",
    }


def run(tmp_path: Path, dr: str, conf: dict[str, Any] | None = None, ti: Ti | None = None) -> Any:
    return DrApprovalOperator(task_id="approve").execute(context(tmp_path, dr, conf, ti))


def answer(tmp_path: Path, dr: str, option: str, user: str) -> Any:
    """What `approve` does once `user` chose `option`, 90 s after it asked (Airflow's answer event)."""
    event = {
        "chosen_options": [option],
        "params_input": {},
        "responded_at": ASKED_AT + timedelta(seconds=90),
        "responded_by_user": {"id": user, "name": user},
    }
    return DrApprovalOperator(task_id="approve").execute_complete(context(tmp_path, dr), event)


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


def test_a_rejection_fails_the_task_naming_who_and_an_approval_hands_who_and_the_wait_to_the_report(
    tmp_path: Path,
) -> None:
    with pytest.raises(AirflowFailException, match="^rejected by approver: nothing changed; "):
        answer(tmp_path, "dr: {approval: required}", "Reject", "approver")
    approved = answer(tmp_path, "dr: {approval: required}", "Approve", "approver")
    assert (approved["approved_by"], approved["wait_seconds"]) == ("approver", 90.0)
    assert approved["step"] == {"started": "2026-11-28T03:00:00.000+00:00", "ended": "2026-11-28T03:01:30.000+00:00"}


def test_four_eyes_refuses_the_triggering_users_own_approval_unless_the_topology_turns_it_off(tmp_path: Path) -> None:
    with pytest.raises(AirflowFailException, match=r"^admin triggered this run and cannot approve it \(dr.four_eyes\)"):
        answer(tmp_path, "dr: {approval: required}", "Approve", "admin")  # four eyes: the default
    approved = answer(tmp_path, "dr: {approval: required, four_eyes: false}", "Approve", "admin")
    assert approved["approved_by"] == "admin"
