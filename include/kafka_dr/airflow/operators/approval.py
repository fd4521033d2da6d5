"""The `approve` task of dr_failover: a person approves the preview before anything changes (Airflow 3's
human-in-the-loop ApprovalOperator; on Airflow 3.3 the task waits in `awaiting_input`, holding no worker slot).

The topology's `dr:` section decides: `approval: none` skips the task; `approvers` are the Airflow users who may answer
(any user when empty); with `four_eyes` the user who triggered the run cannot approve it; after `approval_timeout`
the run fails. A rejection, a timeout or a four-eyes breach fails the task with one line, and every later task with
it: nothing changes. The approval's body is the preview's Markdown, and its request is an `approval_needed` alert.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator, HITLOperator
from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from ...alerts import approval_needed_alert
from ...failover.preview import preview_page
from ...state import now_iso
from ...topology import Topology, load_topology
from .. import topology_path
from ..hooks.alerts import send_alert

REQUESTED_AT = "requested_at"  # XCom key: when the approval was asked for (ISO, UTC), for the wait it took


class DrApprovalOperator(ApprovalOperator):
    """Approve or reject the run's preview (the XCom of `preview_task_id`). Returns {"approved_by", "wait_seconds",
    "step": {"started": asked, "ended": answered}}; skipped when the topology says `dr.approval: none`.

    :param preview_task_id: the task whose XCom is the preview shown for approval
    """

    def __init__(self, *, preview_task_id: str = "preview", **kwargs: Any) -> None:
        super().__init__(subject="kafka-dr approval", **kwargs)
        self.preview_task_id = preview_task_id

    def execute(self, context: Context) -> Any:
        topo = _topology(context)
        if topo.dr.approval == "none":
            raise AirflowSkipException("dr.approval: none in the topology: no approval asked")
        previewed = context["ti"].xcom_pull(task_ids=self.preview_task_id)
        what = f"failover {previewed['failed_cluster']} -> {previewed['target_cluster']} ({previewed['mode']})"
        page = preview_page(previewed)
        self.subject = f"kafka-dr: approve the {what}"
        self.body = page
        self.assigned_users = [{"id": name, "name": name} for name in topo.dr.approvers] or None
        self.response_timeout = timedelta(seconds=topo.dr.approval_timeout_s)
        context["ti"].xcom_push(key=REQUESTED_AT, value=now_iso("milliseconds"))
        dag_id, run_id = context["dag"].dag_id, context["run_id"]
        send_alert(topo, approval_needed_alert(dag_id, run_id, what, previewed["failed_cluster"], page))
        return super().execute(context)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        topo = _topology(context)
        if "error" in event:
            if event.get("error_type") == "timeout":
                limit = topo.dr.approval_timeout_s
                raise AirflowFailException(
                    f"approval timed out after {limit:g} s (dr.approval_timeout): nothing changed"
                )
            raise AirflowFailException(f"approval failed: {event['error']}: nothing changed")
        answer = HITLOperator.execute_complete(self, context, event)  # checks the options chosen
        user = (answer["responded_by_user"] or {}).get("name") or "unknown user"
        if answer["chosen_options"] != [self.APPROVE]:
            raise AirflowFailException(f"rejected by {user}: nothing changed")
        triggered_by = context["dag_run"].triggering_user_name
        if topo.dr.four_eyes and triggered_by and user == triggered_by:
            raise AirflowFailException(
                f"{user} triggered this run and cannot approve it (dr.four_eyes): nothing changed"
            )
        requested = datetime.fromisoformat(context["ti"].xcom_pull(task_ids=self.task_id, key=REQUESTED_AT))
        responded = answer["responded_at"]
        self.log.info("approved by %s", user)
        asked = {
            "started": requested.isoformat(timespec="milliseconds"),
            "ended": responded.isoformat(timespec="milliseconds"),
        }
        wait = round(max(0.0, (responded - requested).total_seconds()), 3)
        return {"approved_by": user, "wait_seconds": wait, "step": asked}  # the step: the report's timing table


def _topology(context: Context) -> Topology:
    return load_topology(topology_path(context["params"].get("topology")))
