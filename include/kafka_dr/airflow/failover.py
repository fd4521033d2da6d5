"""Tasks of the dr_failover DAG (the white paper's "When Disaster Strikes").

dr_failover: validate -> (planned: switch producers -> lag 0) -> stop replication from the failed side
-> translate and apply offsets -> schema redirect -> switch consumers -> verify -> report. The failover itself is
kafka_dr.failover (no Airflow there): these tasks read the params, XComs and connections, call it, and return its
plan and results as typed values (`typed`: kafka_dr.codec's JSON in the XCom), each with when its task started and
ended, so the report shows each step's timing and the RTO (run start to clients switched). Validation runs first and
changes nothing. The report task takes every result it reads as an argument the DAG wires. The mapped operators'
kwargs are built here, from the plan's flows. A task returning a dict pushes it as one XCom
(`multiple_outputs=False`): for a `-> dict` annotation Airflow would push each key again as an XCom of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import get_current_context, task
from airflow.sdk.exceptions import AirflowFailException

from .. import roles
from ..clients import ClientConfigError
from ..failover import outcome, preview, report, stop
from ..failover.outcome import FailoverOutcome
from ..failover.plan import FailoverPlan
from ..failover.preview import Preview
from ..failover.report import FailoverRun
from ..failover.rpo import lag_readings
from ..failover.stop import Stopped
from ..failover.switch import EVERY_ROLE, PRODUCERS, Switched, move_reason, moved_by, switch_clients, writers
from ..replication.replicators import ReplicatorError
from ..reports import Approval
from ..runbooks import see_runbook
from ..schema_redirect.steps import RegistryMove, take_over
from ..schema_registry import RegistryError
from ..topology import Topology, TopologyError, load_topology
from . import topology_path
from .common import flow_kwargs, groups_param, typed, write_report
from .hooks.alerts import send_report_alert, topology_targets
from .hooks.kafka_cluster import ClusterUnreachable, KafkaClusterHook, cluster_access
from .operators.approval import offer_for_approval
from .schema_redirect import registry_failed

log = logging.getLogger(__name__)


@task
@typed
def validate_failover(params: dict[str, Any] | None = None) -> FailoverPlan:
    """Check every param, and the clusters' client settings, before anything changes; returns the run's plan."""
    params = params or {}
    try:
        path = topology_path(params.get("topology"))
        topo = load_topology(path)
        topology_targets(topo)  # a bad alert URL or a missing ${VAR}: one line, before anything changes
        plan = FailoverPlan.build(
            topo,
            str(path),
            params.get("failed_cluster"),
            params.get("target_cluster"),
            params.get("mode"),
            groups_param(params),
            params.get("reset_to_datetime") or None,
            params.get("dry_run", False),
        )
        for cluster in (plan.failed, plan.target):
            KafkaClusterHook(cluster, topology=topo).security_settings()
    except (TopologyError, ClientConfigError, ValueError) as exc:  # a bad alert target's AlertConfigError too
        see = see_runbook("dr_failover", "a-param-or-the-topology-is-wrong")
        raise AirflowFailException(f"{exc}; {see}") from None
    if plan.mode == "planned":
        try:
            KafkaClusterHook(plan.failed, topology=topo).check_reachable(10)
        except ClusterUnreachable as exc:
            raise AirflowFailException(
                f"a planned failover needs {plan.failed} reachable ({exc}); use mode disaster; "
                + see_runbook("dr_failover", "planned-needs-the-failed-cluster-reachable")
            ) from None
    return plan


@task(task_id="preview")
@typed
def preview_failover(failover: FailoverPlan) -> Preview:
    """What the run would do, changing nothing (kafka_dr.failover.preview): lag and RPO estimate, the replicators that
    stop, the groups' offsets, the registry and client moves. Logged as its Markdown page; a dry run's report."""
    topo = load_topology(failover.topology)
    try:
        previewed = preview.preview_failover(failover, cluster_access(topo))
    except ValueError as exc:
        raise AirflowFailException(f"{exc}; {see_runbook('dr_failover', 'group-offsets-not-read')}") from None
    page = preview.preview_page(previewed)
    log.info("preview:\n%s", page)
    context = get_current_context()
    what = f"failover {failover.failed} -> {failover.target} ({failover.mode})"
    offer_for_approval(context, what, failover.failed, page)
    if failover.dry_run:
        dag_id, run_id = context["dag"].dag_id, context["run_id"]
        started = context["dag_run"].start_date
        body = report.dry_run_report(
            failover, previewed, dag_id=dag_id, run_id=run_id, run_started=started, triggered_by=triggered_by(context)
        )
        write_report(dag_id, run_id, body, page)
    return previewed


@task.short_circuit(ignore_downstream_trigger_rules=True)
@typed
def unless_dry_run(failover: FailoverPlan) -> bool:
    """A dry run ends with its preview: every later task is skipped, whatever its trigger rule (those that run
    after skipped paths would otherwise start)."""
    return not failover.dry_run


@task
@typed
def flows_to_drain(failover: FailoverPlan) -> list[dict[str, str]]:
    """Kwargs of the mapped lag gate (planned mode): one per flow from the failed cluster to the target."""
    return flow_kwargs(failover.topology, failover.flows)


@task(trigger_rule="none_failed_min_one_success")
@typed
def translation_kwargs(failover: FailoverPlan) -> list[dict[str, Any]]:
    """Kwargs of the mapped offset translation: one per flow, from checkpoints in a disaster."""
    return translate_kwargs(failover)


def translate_kwargs(
    failover: FailoverPlan, unseen_from: Mapping[str, Mapping[str, int]] | None = None
) -> list[dict[str, Any]]:
    """Kwargs of TranslateOffsetsOperator, one per flow failed -> target; with `unseen_from` (flow -> the target's
    {"topic:partition": offset} from which records were never seen by the source's groups), each flow's entry of it."""
    return [
        {
            "flow": name,
            "topology": failover.topology,
            "groups": failover.groups,
            "from_checkpoints": failover.from_checkpoints,
            "reset_to_datetime": failover.reset_to_datetime,
            **({} if unseen_from is None else {"unseen_from": dict(unseen_from[name])}),
        }
        for name in failover.flows
    ]


@task.branch(trigger_rule="none_failed")  # after `approve`, skipped when the topology needs no approval
@typed
def choose_mode(failover: FailoverPlan) -> str:
    """planned: producers move first and the lag drains to 0; disaster: straight to stopping replication. The
    branch names its own downstream task (disaster_path), not stop_replication further down: naming a task that is
    not a direct downstream skips both paths, and the scheduler then needs another pass (a second, with dag.test)
    before stop_replication may run."""
    return "switch_producers" if failover.mode == "planned" else "disaster_path"


@task
@typed
def switch_producers(failover: FailoverPlan) -> Switched:
    """Planned failover: producers of the failed cluster write to the target from now on."""
    return _switch(failover, PRODUCERS, step="switch_producers")


@task
@typed
def stop_inbound(failover: FailoverPlan) -> Stopped:
    """Planned failover, once producers moved: stop the replicators of the flows into the failed cluster
    (kafka_dr.failover.stop.inbound_flows: else the lag gate may never see 0)."""
    topo = load_topology(failover.topology)
    return _stop(failover, topo, stop.inbound_flows(failover, topo))


@task(trigger_rule="none_failed_min_one_success")
@typed
def stop_replication(failover: FailoverPlan) -> Stopped:
    """Stop the replicators of every flow from or into the failed cluster, wherever they run
    (kafka_dr.failover.stop)."""
    return _stop(failover, load_topology(failover.topology), failover.stop_flows)


def _stop(failover: FailoverPlan, topo: Topology, flows: Sequence[str]) -> Stopped:
    """stop.stop_replication of `flows`."""
    try:
        return Stopped(stop.stop_replication(failover, cluster_access(topo), flows))
    except ReplicatorError as exc:
        raise AirflowFailException(f"{exc}; {see_runbook('dr_failover', 'replication-did-not-stop')}") from None


@task
@typed
def redirect_schema_registry(failover: FailoverPlan) -> RegistryMove:
    """When the failed cluster held the primary registry, make the target's registry lead on its own store."""
    try:
        topo = load_topology(failover.topology)
        return take_over(cluster_access(topo), failover.failed, failover.target)
    except RegistryError as exc:
        raise registry_failed(exc) from None


@task
@typed
def switch_consumers(failover: FailoverPlan) -> Switched:
    """Every remaining client of the failed cluster moves to the target: the end of the RTO."""
    return _switch(failover, EVERY_ROLE, step="switch_consumers")


def _switch(plan: FailoverPlan, roles: tuple[str, ...], step: str) -> Switched:
    context = get_current_context()
    reason = move_reason(context["dag"].dag_id, context["run_id"], plan.mode, step)
    return Switched(tuple(switch_clients(load_topology(plan.topology), plan, roles, reason)))


@task
@typed
def verify_failover(failover: FailoverPlan, translations: list[dict[str, Any]] | None) -> FailoverOutcome:
    """Applied groups hold the translated offsets in the target, no client is left on the failed cluster, and no
    flow from or into it still copies: watched in the targets themselves, whatever the tracker says."""
    # Connections are read here: Airflow's task context is not for other threads.
    access = cluster_access(load_topology(failover.topology))
    verified = outcome.check_failover(access, failover, translations or [])
    if verified.problems:
        see = see_runbook("dr_failover", "verify-found-a-problem")
        raise AirflowFailException("; ".join([*verified.problems, see]))
    return verified


@task(multiple_outputs=False, trigger_rule="none_failed_min_one_success")
@typed
def failover_report(
    failover: FailoverPlan,
    previewed: Preview,
    stopped: Stopped | None,
    translations: list[dict[str, Any]] | None,
    registry: RegistryMove | None,
    consumers: Switched | None,
    verified: FailoverOutcome | None,
    approval: Approval | None,
) -> dict[str, Any]:
    """RPO, RTO, groups translated and skipped, registry state and every step's timing, as JSON and as a
    readable page in STATE_DIR/reports/: gathered here, built by kafka_dr.failover.report, with the preview. Each
    later step's result is None when the step did not run (`approval`: when none was asked)."""
    context = get_current_context()
    dag_id, run_id = context["dag"].dag_id, context["run_id"]
    topo = load_topology(failover.topology)
    run = FailoverRun(stopped, tuple(translations or ()), registry, consumers, verified, approval)
    body = report.failover_report(
        failover,
        run,
        lag_readings(cluster_access(topo), failover.flows),
        dag_id=dag_id,
        run_id=run_id,
        run_started=context["dag_run"].start_date,
        producers_first=moved_by(move_reason(dag_id, run_id, "planned", "switch_producers")),
        previewed=previewed,
        triggered_by=triggered_by(context),
        writers=writers(topo),
    )
    written = write_report(dag_id, run_id, body, report.failover_page(body))
    if consumers is not None:  # the clients moved: the deployment is failed over until a failback (kafka_dr.roles)
        started = context["dag_run"].start_date
        roles.failed_over(
            failover.failed, failover.target, failover.mode, run_id, started.isoformat(timespec="seconds")
        )
    send_report_alert(topo, dag_id, run_id, written)
    return written


def triggered_by(context: Any) -> str | None:
    """Who started the run: the Airflow user (UI, REST, CLI), else the DAG that proposed it (conf `proposed_by`)."""
    run = context["dag_run"]
    return run.triggering_user_name or (run.conf or {}).get("proposed_by")
