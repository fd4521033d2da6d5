"""Tasks of dr_replication_health: validate, check each flow (mapped, so one flow's outage cannot hide another's
status), self-heal dead continuous replicators, report and fail loudly.

The checking itself is kafka_dr.health (no Airflow there); these tasks add the Airflow connections' client
settings, the restart of a dead replicator with its own command line, and the run's report.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from datetime import UTC, datetime
from typing import Any

from airflow.sdk import get_current_context, task
from airflow.sdk.exceptions import AirflowFailException

from .. import readiness, roles
from ..alerts import answers, notify_failovers, notify_flow_statuses, notify_readiness
from ..clients import ClientConfigError
from ..health.check import Checked, check_flow_findings
from ..health.healing import heal
from ..health.proposal import cluster_reachability, proposals, record_run
from ..health.rules import render_table
from ..state import now_iso
from ..topology import TopologyError, load_topology
from . import topology_path
from .common import flow_kwargs, selected_flows, typed, write_report
from .hooks.alerts import alert_targets
from .hooks.kafka_cluster import cluster_access
from .site import known_users, paused_dags


@task
def validate_flows(params: dict[str, Any] | None = None) -> list[dict[str, str]]:
    """The flows to check (param flows; empty: all), one {"flow", "topology"} each, after checking the topology
    and each cluster's client settings."""
    try:
        path, topo, selected = selected_flows(params or {})
    except (TopologyError, ClientConfigError, ValueError) as exc:
        raise AirflowFailException(str(exc)) from None
    alert_targets(topo)  # a bad alert URL or a missing ${VAR} fails here, before any flow is checked
    return flow_kwargs(str(path), [flow.name for flow in selected])


@task
@typed
def check(flow: str, topology: str) -> Checked:
    """One health sample and evaluation of `flow` (what `kafka-dr health --flow FLOW` shows), with the cluster the
    check could not reach."""
    health, findings = check_flow_findings(cluster_access(load_topology(topology)), flow)
    print(render_table([health]))  # the task log's table
    return Checked(health, findings.unreachable_cluster)


@task
@typed
def count_outages(checked: list[Checked], topology: str | None = None) -> list[dict[str, Any]]:
    """Count this run into each cluster's outage (kafka_dr.health.proposal) and return the disaster failovers to
    propose, as the kwargs of the mapped `propose_failover` (its run id and conf); none is an empty list, and the
    proposing task is then skipped."""
    path = topology_path(topology)
    topo = load_topology(path)
    reachable = cluster_reachability(topo, {c.health.name: c.unreachable_cluster for c in checked})
    outages = record_run(reachable, now_iso())
    for outage in outages.values():
        print(f"{outage.cluster} unreachable in {outage.runs} runs in a row, since {outage.since}")
    made, refused = proposals(outages, topo, str(path), roles.pending())
    for line in refused:
        print(line)
    for made_one in made:
        print(f"proposing a disaster failover {made_one.cluster} -> {made_one.target}: run {made_one.run_id}")
    return [{"trigger_run_id": p.run_id, "conf": p.conf} for p in made]


@task
@typed
def self_heal(checked: list[Checked], topology: str | None = None) -> list[dict[str, Any]]:
    """Restart each continuous replicator found dead (see kafka_dr.health.healing for the limits)."""
    access = cluster_access(load_topology(topology_path(topology)))
    actions = []
    for one in checked:
        action = heal(one.health, access)
        if action is not None:
            print(f"flow {one.health.name}: {action['action']}: {action['reason']}")
            actions.append(action)
    return actions


@task(on_failure_callback=None)  # its failure is a flow in ERR: the flow_status alerts already say so, once
@typed
def report(checked: list[Checked], healed: list[dict[str, Any]], topology: str | None = None) -> dict[str, Any]:
    """Send the alerts the run calls for (kafka_dr.alerts: a flow's status change fires or resolves, an unchanged ERR
    repeats after `repeat_after`; while a failback is pending, one `failed_over` alert per failover instead of those
    of the flows from or into the cluster failed over from), write the run's snapshot to
    STATE_DIR/reports/<dag>-<run>.json, then fail the run with one line per flow in ERR (a flow whose dead replicator
    was just restarted, or whose cluster was failed over from, is reported, not failed). A target that does not
    accept an alert is logged and listed, never a failure."""
    context = get_current_context()
    dag_id, run_id = context["dag"].dag_id, context["run_id"]
    flows = [c.health for c in checked]
    restarted = {action["flow"] for action in healed if action["action"] == "restarted"}
    topo = load_topology(topology_path(topology))
    failovers = roles.pending()
    folded = roles.away_flows(topo, failovers)
    for entry in failovers.values():
        print(f"failed over: {entry.line()}")
    to = alert_targets(topo)
    sent = notify_flow_statuses(topo.alerts, [h for h in flows if h.name not in folded], to)
    sent += notify_failovers(topo.alerts, failovers, to)
    for alert in sent:
        print(f"alert sent: {alert['title']} ({answers(alert['targets'])})")
    body = {
        "dag_id": dag_id,
        "run_id": run_id,
        "finished_at": now_iso(),
        "flows": [h.to_dict() for h in flows],
        "self_heal": list(healed),
        "failed_over": [asdict(entry) for entry in failovers.values()],
        "alerts": sent,
    }
    written = write_report(dag_id, run_id, body)
    print(render_table(flows))
    failed = [h.failure_line() for h in flows if h.status == "ERR" and h.name not in restarted | folded]
    if failed:
        raise AirflowFailException("\n".join(failed))
    return written


@task(task_id="readiness")
@typed
def check_readiness(checked: list[Checked], topology: str | None = None) -> dict[str, Any]:
    """What would stop or slow a failover now (kafka_dr.readiness), with Airflow's own facts read from here (paused
    DR DAGs, the auth manager's users) and the flows' lags this run measured: saved for the DR page and the metrics,
    and alerted when it degrades (`readiness`: once per change, repeated at `repeat_after`). Never fails the run: a
    health run's failure says a flow is in ERR."""
    topo = load_topology(topology_path(topology))
    lags = {
        c.health.name: None if c.unreachable_cluster else sum(p.lag_records for p in c.health.partitions)
        for c in checked
    }
    now = datetime.now(UTC)
    facts = readiness.gather(cluster_access(topo), now, lags)
    facts = replace(
        facts, paused_dags=paused_dags(get_current_context()["ti"], readiness.DR_DAGS), known_users=known_users()
    )
    findings = readiness.evaluate(topo, facts)
    for finding in findings:
        print(finding.line())
    for alert in notify_readiness(topo.alerts, findings, alert_targets(topo)):
        print(f"alert sent: {alert['title']} ({answers(alert['targets'])})")
    return readiness.save(findings, now)
