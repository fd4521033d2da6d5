"""The `approve` task of dr_failover and dr_failback: a person approves the preview before anything changes (Airflow
3's human-in-the-loop ApprovalOperator; on Airflow 3.3 the task waits in `awaiting_input`, holding no worker slot).

The topology's `dr:` section decides: `approval: none` skips the task; `approvers` are the Airflow users who may answer
(any user when empty); with `four_eyes` the user who triggered the run cannot approve it; after `approval_timeout`
the run fails. A rejection, a timeout or a four-eyes breach fails the task with one line, and every later task with
it: nothing changes. The preview task offers what is to be approved (`offer_for_approval`): a one-line summary, the
cluster it is about and the preview's Markdown, the approval's body; the request is an `approval_needed` alert.

A failover proposed by dr_replication_health (conf `proposed_by`) always waits for a person, whatever
`dr.approval` says, and its wait is a trigger's (ProposalApprovalTrigger): it ends by itself, failing with "<cluster>
reachable again", when the lost cluster answers again before anyone approved.

A drill's inner run (conf `drill_run_id`, `drill_approval: skip`) is approved by the drill's own approval: the task
looks the drill run up and takes its `approve` result, only while that run is running; otherwise it asks as usual.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator, HITLOperator
from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException, TaskAwaitingInput
from airflow.sdk.timezone import utcnow

from ...alerts import approval_needed_alert
from ...codec import encode
from ...reports import Approval
from ...runbooks import see_runbook
from ...state import now_iso
from ...topology import Topology, load_topology
from .. import topology_path
from ..hooks.alerts import send_alert
from ..triggers.proposal import REACHABLE_AGAIN, ProposalApprovalTrigger

REQUESTED_AT = "requested_at"  # XCom key: when the approval was asked for (ISO, UTC), for the wait it took
OFFERED = "approval_request"  # XCom key of the preview task: {"what", "cluster", "page"}


def offer_for_approval(context: Context, what: str, cluster: str, page: str) -> None:
    """From the preview task: what the `approve` task shows (`what`: one line such as "failover dc1 -> dc2
    (disaster)"; `cluster`: the one it is about, the alert's subject; `page`: the preview in Markdown)."""
    context["ti"].xcom_push(key=OFFERED, value={"what": what, "cluster": cluster, "page": page})


class DrApprovalOperator(ApprovalOperator):
    """Approve or reject what the preview task offered (`offer_for_approval`). Returns an Approval (kafka_dr.reports:
    who approved, the wait, and the step from asked to answered) as its JSON; skipped when the topology says
    `dr.approval: none`.

    :param preview_task_id: the task that offered the preview for approval
    """

    def __init__(self, *, preview_task_id: str = "preview", **kwargs: Any) -> None:
        super().__init__(subject="kafka-dr approval", **kwargs)
        self.preview_task_id = preview_task_id

    def execute(self, context: Context) -> Any:
        topo = _topology(context)
        conf = context["dag_run"].conf or {}
        proposed = conf.get("proposed_by")
        if topo.dr.approval == "none" and not proposed:
            raise AirflowSkipException("dr.approval: none in the topology: no approval asked")
        by_drill = _drill_approval(context, conf)
        if by_drill is not None:
            self.log.info("approved by drill %s: %s", conf["drill_run_id"], by_drill.approved_by)
            return encode(by_drill)
        offered = context["ti"].xcom_pull(task_ids=self.preview_task_id, key=OFFERED)
        what, page = offered["what"], offered["page"]
        self.subject = f"kafka-dr: approve the {what}"
        self.body = page
        self.assigned_users = [{"id": name, "name": name} for name in topo.dr.approvers] or None
        self.response_timeout = timedelta(seconds=topo.dr.approval_timeout_s)
        context["ti"].xcom_push(key=REQUESTED_AT, value=now_iso("milliseconds"))
        dag_id, run_id = context["dag"].dag_id, context["run_id"]
        send_alert(topo, approval_needed_alert(dag_id, run_id, what, offered["cluster"], page))
        try:
            return super().execute(context)  # writes the request; on Airflow 3.3 the task then awaits input
        except TaskAwaitingInput:
            if not proposed:
                raise
        self.defer(
            trigger=ProposalApprovalTrigger(
                ti_id=context["task_instance"].id,
                options=self.options,
                params=self.serialized_params,
                defaults=self.defaults,
                multiple=self.multiple,
                timeout_datetime=utcnow() + self.response_timeout,
                cluster=offered["cluster"],
                topology=str(topology_path(context["params"].get("topology"))),
            ),
            method_name="execute_complete",
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        topo = _topology(context)
        if "error" in event:
            if event.get("error_type") == REACHABLE_AGAIN:
                raise AirflowFailException(
                    f"{event['error']}: the proposed failover ends, nothing changed; "
                    + see_runbook("dr_failover", "the-lost-cluster-answers-again")
                )
            if event.get("error_type") == "timeout":
                limit = topo.dr.approval_timeout_s
                raise AirflowFailException(
                    f"approval timed out after {limit:g} s (dr.approval_timeout): nothing changed; "
                    + see_runbook("dr_failover", "approval-timed-out")
                )
            see = see_runbook("dr_failover", "approval-failed")
            raise AirflowFailException(f"approval failed: {event['error']}: nothing changed; {see}")
        answer = HITLOperator.execute_complete(self, context, event)  # checks the options chosen
        user = (answer["responded_by_user"] or {}).get("name") or "unknown user"
        if answer["chosen_options"] != [self.APPROVE]:
            see = see_runbook("dr_failover", "approval-rejected")
            raise AirflowFailException(f"rejected by {user}: nothing changed; {see}")
        triggered_by = context["dag_run"].triggering_user_name
        if topo.dr.four_eyes and triggered_by and user == triggered_by:
            raise AirflowFailException(
                f"{user} triggered this run and cannot approve it (dr.four_eyes): nothing changed; "
                + see_runbook("dr_failover", "the-user-who-triggered-cannot-approve")
            )
        requested = datetime.fromisoformat(context["ti"].xcom_pull(task_ids=self.task_id, key=REQUESTED_AT))
        responded = answer["responded_at"]
        self.log.info("approved by %s", user)
        asked = {
            "started": requested.isoformat(timespec="milliseconds"),
            "ended": responded.isoformat(timespec="milliseconds"),
        }
        wait = round(max(0.0, (responded - requested).total_seconds()), 3)
        return encode(Approval(user, wait, asked))  # the step: the report's timing table


class DrillApprovalOperator(DrApprovalOperator):
    """dr_drill's `approve`: with param `approval: skip` one approval covers the drill's failover and failback;
    with `as_topology` it is skipped and each of them asks on its own."""

    def execute(self, context: Context) -> Any:
        if context["params"].get("approval") != "skip":
            raise AirflowSkipException("approval: as_topology: the drill's failover and failback each ask")
        return super().execute(context)


def _drill_approval(context: Context, conf: dict[str, Any]) -> Approval | None:
    """The approval a running drill gave for this inner run (conf `drill_approval: skip`), None when there is none."""
    drill_run = conf.get("drill_run_id")
    if conf.get("drill_approval") != "skip" or not isinstance(drill_run, str):
        return None
    ti = context["ti"]
    if ti.get_dagrun_state("dr_drill", drill_run) != "running":
        return None
    approved = ti.xcom_pull(task_ids="approve", dag_id="dr_drill", run_id=drill_run)
    if not isinstance(approved, dict) or not approved.get("approved_by"):
        return None  # the drill's approval was skipped (dr.approval: none) or not given
    at = now_iso("milliseconds")
    return Approval(f"{approved['approved_by']} (drill {drill_run})", 0.0, {"started": at, "ended": at})


def _topology(context: Context) -> Topology:
    return load_topology(topology_path(context["params"].get("topology")))
