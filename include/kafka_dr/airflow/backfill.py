"""Tasks of the dr_backfill DAG: validate the params (the window: params, else the run's data interval) before
anything changes, then report. The copy and the window's verification are BackfillOperator's; the backfill itself
is kafka_dr.backfill (no Airflow there)."""

from __future__ import annotations

from typing import Any

from airflow.sdk import get_current_context, task
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from ..backfill import report
from ..backfill.plan import BackfillPlan, idle_reason
from ..backfill.window import BackfillError
from ..clients import ClientConfigError
from ..replication.flow_clients import UnreachableError
from ..topology import TopologyError, load_topology
from . import topology_path
from .common import boolean_param, typed, write_report
from .hooks.alerts import alert_targets, send_report_alert
from .hooks.kafka_cluster import cluster_access


@task(multiple_outputs=True)  # a field per XCom: the DAG hands them to BackfillOperator's arguments
@typed
def validate_backfill(params: dict[str, Any] | None = None) -> BackfillPlan:
    """Check every param and the window against the source (offsets past the end, topics outside the flow, a target
    that would take the copies out of order); returns the backfill's arguments (BackfillPlan). A run without window
    params takes its data interval (Airflow's own backfill re-runs past hours this way). A scheduled run skips itself,
    and so the run (its hourly data intervals are for Airflow's backfill)."""
    params = params or {}
    context = get_current_context()
    try:
        path = topology_path(params.get("topology"))
        topo = load_topology(path)
        alert_targets(topo)  # a bad alert URL or a missing ${VAR}: one line, before anything changes
        run_type = context["dag_run"].run_type
        idle = idle_reason(getattr(run_type, "value", str(run_type)))
        if idle is not None:
            raise AirflowSkipException(idle)
        flow = topo.flow(str(params.get("flow") or ""))
        start, end = params.get("window_start") or None, params.get("window_end") or None
        offsets = params.get("offsets") or None
        if not (start or end or offsets):
            start, end = context["data_interval_start"].isoformat(), context["data_interval_end"].isoformat()
        plan = BackfillPlan.build(
            cluster_access(topo),
            str(path),
            flow,
            start,
            end,
            offsets,
            params.get("topics") or None,
            params.get("target_topic") or None,
            boolean_param(params, "dry_run", default=False),
        )
    except (TopologyError, ClientConfigError, BackfillError, UnreachableError, ValueError) as exc:
        raise AirflowFailException(str(exc)) from None
    return plan


@task
@typed
def backfill_report(backfill: BackfillPlan, summary: dict[str, Any]) -> dict[str, Any]:
    """The report docs/design.md fixes (window, copied, already_present, unavailable, verify) as JSON and a page."""
    context = get_current_context()
    dag_id, run_id = context["dag"].dag_id, context["run_id"]
    body = report.backfill_report(backfill, summary, dag_id=dag_id, run_id=run_id)
    written = write_report(dag_id, run_id, body, report.backfill_page(body))
    send_report_alert(load_topology(backfill.topology), dag_id, run_id, written)
    return written
