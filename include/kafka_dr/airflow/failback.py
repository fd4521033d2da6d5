"""Tasks of the dr_failback DAG (seeds 001 and 004: bringing the failed cluster back after a failover).

validate -> measure what never left the restored cluster (the exact RPO of the disaster; the failover report this
failback follows gains the figure) -> decide: the report is written, and the run stops there on a dry run, or when
records never left and `unreplicated` is `report` (nothing changed; one line says how to continue) -> resync (the
serving cluster's records into the restored one, by the flows back or the inverse of the flows out) -> the switch
back, a planned failover in reverse made of dr_failover's own tasks (producers back, catch-up resync, lag 0, the
unreplicated records republished or discarded, offsets translated back, registry back, consumers back) -> every flow
of the topology resumed -> verify -> report. The failback itself is kafka_dr.failback (no Airflow there): these
tasks read the params, XComs and connections, call it, and return its plans and results as typed values (`typed`:
kafka_dr.codec's JSON in the XCom), each with when its task started and ended, for the report's step table.
Validation runs first and changes nothing. The report task takes every result it reads as an argument the DAG
wires; the mapped operators' kwargs are built here. `prepare_switch_back` pushes each field of its result as an XCom
of its own too: the DAG hands its `failover` to dr_failover's switch tasks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from airflow.sdk import get_current_context, task
from airflow.sdk.exceptions import AirflowFailException

from .. import roles
from ..clients import ClientConfigError
from ..failback import outcome, report, republish, switch_back
from ..failback.outcome import FailbackOutcome
from ..failback.plan import FailbackPlan, SwitchBack
from ..failback.report import FailbackRun
from ..failback.republish import Handled
from ..failback.unreplicated import Measured, MeasureError, UnreplicatedRange, unreplicated_of
from ..failover.switch import Switched
from ..reports import Approval
from ..runbooks import see_runbook
from ..schema_redirect.steps import RegistryMove, hand_back
from ..schema_registry import RegistryError
from ..state import subdir
from ..topology import TopologyError, load_topology
from . import topology_path
from .common import boolean_param, flow_kwargs, groups_param, typed, write_report
from .failover import translate_kwargs, triggered_by
from .hooks.alerts import alert_targets, send_report_alert
from .hooks.kafka_cluster import ClusterUnreachable, KafkaClusterHook, cluster_access
from .operators.approval import offer_for_approval
from .schema_redirect import registry_failed

VERIFY_SETTLE_S = 60.0  # the flows run again while they are verified: time for a record produced meanwhile


@task
@typed
def validate_failback(params: dict[str, Any] | None = None) -> FailbackPlan:
    """Check every param, and that both clusters answer, before anything changes; returns the run's plan."""
    params = params or {}
    try:
        path = topology_path(params.get("topology"))
        topo = load_topology(path)
        alert_targets(topo)  # a bad alert URL or a missing ${VAR}: one line, before anything changes
        restored, serving = params.get("restored_cluster"), params.get("serving_cluster")
        FailbackPlan.check(topo, restored, serving, params.get("mode"), params.get("unreplicated"))
        groups = groups_param(params)
        dry_run = boolean_param(params, "dry_run", default=False)
        cluster_ids = {}
        for cluster in (restored, serving):
            hook = KafkaClusterHook(cluster, topology=topo)
            hook.security_settings()
            try:
                cluster_ids[cluster] = hook.check_reachable(10)
            except ClusterUnreachable as exc:
                raise ValueError(f"a failback needs both clusters: {exc}") from None
    except (TopologyError, ClientConfigError, ValueError) as exc:
        raise AirflowFailException(str(exc)) from None
    return FailbackPlan.build(
        topo,
        str(path),
        restored,
        cluster_ids[restored],
        serving,
        params["mode"],
        params["unreplicated"],
        groups,
        dry_run,
    )


@task
@typed
def measure_unreplicated(failback: FailbackPlan) -> Measured:
    """data_kept: the records that never left the restored cluster, exactly (kafka_dr.failback.unreplicated).
    data_lost: they are gone with the cluster's data, so the failover report's estimate stands."""
    try:
        return unreplicated_of(cluster_access(load_topology(failback.topology)), failback)
    except MeasureError as exc:
        raise AirflowFailException(str(exc)) from None


@task.short_circuit
@typed
def decide(failback: FailbackPlan, measured: Measured) -> dict[str, Any] | bool:
    """Write the report (and the exact RPO into the failover report this failback follows); then stop on a dry run,
    or when records never left and `unreplicated` is `report`, with one line saying how to continue. Otherwise the
    report's page is the preview offered for approval."""
    context = get_current_context()
    dag_id, run_id = context["dag"].dag_id, context["run_id"]
    body = report.failback_report(
        failback,
        FailbackRun(measure_unreplicated=measured),
        dag_id=dag_id,
        run_id=run_id,
        run_started=context["dag_run"].start_date,
        triggered_by=triggered_by(context),
    )
    page = report.failback_page(body)
    written = write_report(dag_id, run_id, body, page)
    if body["unreplicated"]["records"] is not None:
        report.add_exact_rpo(failback.restored, failback.serving, body["unreplicated"], run_id)
    line = stop_message(failback, body["unreplicated"], written["report_file"])
    if line is not None:
        raise AirflowFailException(line)
    what = f"failback {failback.serving} -> {failback.restored} ({failback.mode})"
    offer_for_approval(context, f"{what}, unreplicated records: {failback.unreplicated}", failback.restored, page)
    return False if failback.dry_run else written  # False: a dry run ends here, every later step skipped


@task(multiple_outputs=True, trigger_rule="none_failed")  # after `approve`, skipped when no approval is needed
@typed
def prepare_switch_back(failback: FailbackPlan) -> SwitchBack:
    """The flows that resync and the switch back as dr_failover's tasks take it: a planned failover from the serving
    cluster to the restored one, moving only the aliases at home in the restored cluster (SwitchBack). data_lost:
    the resync forces the copy of the records that first came from the restored cluster, up to the run's start."""
    context = get_current_context()
    run_id = context["run_id"]
    derived = subdir("failback") / f"{re.sub(r'[^A-Za-z0-9._-]', '_', run_id)}.topology.yaml"
    access = cluster_access(load_topology(failback.topology))
    try:
        return switch_back.prepare_switch_back(failback, access, derived, context["dag_run"].start_date)
    except (TopologyError, switch_back.SwitchBackError) as exc:
        raise AirflowFailException(str(exc)) from None


@task
@typed
def resync_kwargs(back: SwitchBack) -> list[dict[str, Any]]:
    """Kwargs of the mapped resync runs: one per flow into the restored cluster, with the override of data_lost."""
    return [{**one, "force": back.force} for one in flow_kwargs(back.topology, back.flows)]


@task
@typed
def gate_kwargs(back: SwitchBack) -> list[dict[str, str]]:
    """Kwargs of the mapped lag gate: one per flow into the restored cluster."""
    return flow_kwargs(back.topology, back.flows)


@task(multiple_outputs=False)
@typed
def mark_restored_ends(switch: SwitchBack) -> dict[str, dict[str, int]]:
    """Per resync flow, the end offsets of its destination partitions in the restored cluster just before producers
    move back (kafka_dr.failback.switch_back.restored_ends says why)."""
    try:
        return switch_back.restored_ends(switch, cluster_access(load_topology(switch.topology)))
    except switch_back.SwitchBackError as exc:
        raise AirflowFailException(str(exc)) from None


@task
@typed
def translate_back_kwargs(back: SwitchBack, mark: dict[str, dict[str, int]]) -> list[dict[str, Any]]:
    """Kwargs of the mapped offset translation back: one per resync flow, planned (from the serving cluster), with
    the restored cluster's ends of its partitions before producers moved back as `unseen_from`."""
    return translate_kwargs(back.failover, unseen_from=mark)


@task
@typed
def handle_unreplicated(failback: FailbackPlan, measured: Measured) -> Handled:
    """republish: the records that never left are produced again at the end of their partitions in the restored
    cluster, after the resynced copies, where the groups moved back read next; discard: left unread. Either way
    the flows out move past the originals, so they are never copied (kafka_dr.failback.republish)."""
    return republish.handle(cluster_access(load_topology(failback.topology)), failback, measured)


@task
@typed
def registry_back(failback: FailbackPlan) -> RegistryMove:
    """When the topology's primary registry is on the restored cluster: it leads on its own store again, and the
    serving cluster's registry follows that store (the reverse of dr_failover's redirect)."""
    topo = load_topology(failback.topology)
    try:
        return hand_back(cluster_access(topo), failback.restored, failback.serving)
    except RegistryError as exc:  # its line ends with dr_schema_redirect's section on it, as dr_failover's redirect
        raise registry_failed(exc) from None


@task
@typed
def resume_kwargs(failback: FailbackPlan) -> list[dict[str, str]]:
    """Kwargs of the mapped continuous replicators: every flow of the topology."""
    return flow_kwargs(failback.topology, [f.name for f in load_topology(failback.topology).flows])


@task
@typed
def verify_kwargs(back: SwitchBack, measured: Measured) -> list[dict[str, Any]]:
    """Kwargs of the mapped verify jobs: every flow of the derived topology (every flow of the topology and every
    inverse made for the resync), so each cluster is checked per origin. The flows out skip the unreplicated ranges
    handled (republished copies stand for them, or they stay unread); the resync flows carry the override they were
    copied with."""
    flows = [f.name for f in load_topology(back.topology).flows]
    return [
        {
            "flow": name,
            "topology": back.topology,
            "skip": _skips(name, measured.ranges),
            "settle": VERIFY_SETTLE_S,
            "force": back.force_of(name),
        }
        for name in flows
    ]


def _skips(flow: str, ranges: Sequence[UnreplicatedRange]) -> list[str]:
    """VerifyFlowOperator's `skip` of `flow`: its ranges as "topic:partition:first-last"."""
    return [f"{r.topic}:{r.partition}:{r.from_offset}-{r.to_offset}" for r in ranges if r.flow == flow]


@task
@typed
def verify_failback(
    switch: SwitchBack, translations: list[dict[str, Any]] | None, verifications: list[dict[str, Any]] | None
) -> FailbackOutcome:
    """Every group moved back holds its translated offsets in the restored cluster and no alias at home there is
    left on the serving cluster; with the verify jobs (each fails its own task on a record missing, duplicated or
    changed), what each flow holds."""
    access = cluster_access(load_topology(switch.topology))
    problems, verified = outcome.check_failback(switch, access, translations or [], verifications or [])
    if problems:
        raise AirflowFailException("; ".join(problems))
    return verified


@task(multiple_outputs=False, trigger_rule="none_failed_min_one_success")
@typed
def failback_report(
    failback: FailbackPlan,
    measured: Measured | None,
    approval: Approval | None,
    back: SwitchBack | None,
    resync_runs: list[dict[str, Any]] | None,
    producers: Switched | None,
    catch_up_runs: list[dict[str, Any]] | None,
    handled: Handled | None,
    registry: RegistryMove | None,
    consumers: Switched | None,
    verified: FailbackOutcome | None,
) -> dict[str, Any]:
    """What never left, what was done with it, records resynced, RTO and every step's timing, as JSON and as a
    page in STATE_DIR/reports/ (built by kafka_dr.failback.report). Each later step's result is None when the step
    did not run (`approval`: when none was asked); the resync's runs are the replication jobs' summaries."""
    context = get_current_context()
    dag_id, run_id = context["dag"].dag_id, context["run_id"]
    runs = [*(resync_runs or []), *(catch_up_runs or [])]
    run = FailbackRun(
        measured, approval, back, report.resync_records(runs), producers, handled, registry, consumers, verified
    )
    started = context["dag_run"].start_date
    body = report.failback_report(
        failback, run, dag_id=dag_id, run_id=run_id, run_started=started, triggered_by=triggered_by(context)
    )
    written = write_report(dag_id, run_id, body, report.failback_page(body))
    if consumers is not None:  # the clients are back: the failover of the restored cluster is over (kafka_dr.roles)
        roles.failed_back(failback.restored)
    send_report_alert(load_topology(failback.topology), dag_id, run_id, written)
    return written


def stop_message(failback: FailbackPlan, unreplicated: dict[str, Any], report_file: str) -> str | None:
    """The line `decide` stops the run with (FailbackPlan.stop_line: records never left and the action is `report`),
    naming the runbook section on choosing republish or discard; None when the failback goes on."""
    line = failback.stop_line(unreplicated, report_file)
    if line is None:
        return None
    return f"{line}; {see_runbook('dr_failback', 'records-never-left-the-restored-cluster')}"
