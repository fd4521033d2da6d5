"""Tasks of the dr_failback DAG (seeds 001 and 004: bringing the failed cluster back after a failover).

validate -> measure what never left the restored cluster (the exact RPO of the disaster; the failover report this
failback follows gains the figure) -> decide: the report is written, and the run stops there on a dry run, or when
records never left and `unreplicated` is `report` (nothing changed; one line says how to continue). Every task is
timed (`timed`) for the report's step table. Validation runs first and changes nothing.
"""

from __future__ import annotations

import json
import re
from typing import Any

from airflow.sdk import get_current_context, task
from airflow.sdk.exceptions import AirflowFailException

from .. import reports
from ..clients import ClientConfigError
from ..failback.unreplicated import MeasureError, measure
from ..state import subdir
from ..topology import TopologyError, load_topology
from . import topology_path
from .common import timed, write_report
from .hooks.kafka_cluster import ClusterUnreachable, KafkaClusterHook

MODES = ("data_kept", "data_lost")
ACTIONS = ("report", "republish", "discard")


@task
@timed
def validate_failback(params: dict[str, Any] | None = None) -> dict[str, Any]:
    """Check every param, and that both clusters answer, before anything changes; returns the run's plan."""
    params = params or {}
    try:
        path = topology_path(params.get("topology"))
        topo = load_topology(path)
        restored, serving = params.get("restored_cluster"), params.get("serving_cluster")
        topo.cluster(str(restored))
        topo.cluster(str(serving))
        if restored == serving:
            raise ValueError(f"params restored_cluster and serving_cluster are both {restored!r}")
        mode, action = params.get("mode"), params.get("unreplicated")
        if mode not in MODES:
            raise ValueError(f"param mode: must be one of {', '.join(MODES)}, got {mode!r}")
        if action not in ACTIONS:
            raise ValueError(f"param unreplicated: must be one of {', '.join(ACTIONS)}, got {action!r}")
        groups = params.get("groups") or ".*"
        try:
            re.compile(groups)
        except re.error as exc:
            raise ValueError(f"param groups: bad regex {groups!r}: {exc}") from None
        dry_run = params.get("dry_run", False)
        if not isinstance(dry_run, bool):
            raise ValueError(f"param dry_run: must be true or false, got {dry_run!r}")
        out_of = [f.name for f in topo.flows if f.source == restored and f.target == serving]
        back = [f.name for f in topo.flows if f.source == serving and f.target == restored]
        if not out_of and not back:
            raise ValueError(f"no flow between {restored} and {serving} either way: there is nothing to fail back")
        for cluster in (restored, serving):
            hook = KafkaClusterHook(cluster, topology=topo)
            hook.security_settings()
            try:
                hook.check_reachable(10)
            except ClusterUnreachable as exc:
                raise ValueError(f"a failback needs both clusters: {exc}") from None
    except (TopologyError, ClientConfigError, ValueError) as exc:
        raise AirflowFailException(str(exc)) from None
    return {
        "topology": str(path),
        "restored": restored,
        "serving": serving,
        "mode": mode,
        "unreplicated": action,
        "groups": groups,
        "dry_run": dry_run,
        "flows_out": out_of,
        "flows_back": back,
    }


@task
@timed
def measure_unreplicated(plan: dict[str, Any]) -> dict[str, Any]:
    """data_kept: the records that never left the restored cluster, exactly (kafka_dr.failback.unreplicated).
    data_lost: they are gone with the cluster's data, so the failover report's estimate stands."""
    if plan["mode"] == "data_lost":
        note = f"{plan['restored']} lost its data: what never left it is gone, the failover report's estimate stands"
        return {"unreplicated": {"records": None, "per_topic": {}, "ranges": [], "note": note}}
    try:
        found = measure(load_topology(plan["topology"]), plan["restored"], plan["serving"])
    except MeasureError as exc:
        raise AirflowFailException(str(exc)) from None
    return {"unreplicated": found.to_dict()}


@task
def decide(plan: dict[str, Any], measured: dict[str, Any]) -> dict[str, Any]:
    """Write the report (and the exact RPO into the failover report this failback follows); then stop on a dry run,
    or when records never left and `unreplicated` is `report`, with one line saying how to continue."""
    context = get_current_context()
    dag_id, run_id = context["dag"].dag_id, context["run_id"]
    body = reports.failback_report(
        plan,
        {"measure_unreplicated": measured},
        dag_id=dag_id,
        run_id=run_id,
        run_started=context["dag_run"].start_date,
    )
    written = write_report(dag_id, run_id, body, reports.failback_page(body))
    count = body["unreplicated"]["records"]
    if count is not None:
        _add_exact_rpo(plan["restored"], plan["serving"], body["unreplicated"], run_id)
    if plan["unreplicated"] == "report" and count and not plan["dry_run"]:
        topics = ", ".join(f"{topic} {n}" for topic, n in body["unreplicated"]["per_topic"].items())
        raise AirflowFailException(
            f"{count} records never left {plan['restored']} ({topics}; ranges in {written['report_file']}); nothing "
            f"changed: run again with unreplicated=republish to have the moved groups read them once, or discard "
            f"to leave them unread"
        )
    return written


def _add_exact_rpo(restored: str, serving: str, unreplicated: dict[str, Any], failback_run: str) -> None:
    """The latest dr_failover report of `restored` -> `serving` gains the exact figure beside its estimate."""
    found = []
    for path in subdir("reports").glob("dr_failover-*.json"):
        body = json.loads(path.read_text(encoding="utf-8"))
        if (body.get("failed_cluster"), body.get("target_cluster")) == (restored, serving):
            found.append((body["run_started"], path, body))
    if not found:
        return
    _, path, body = max(found, key=lambda item: item[0])
    updated = reports.with_exact_rpo(body, unreplicated, failback_run)
    path.write_text(json.dumps(updated, indent=2, default=str) + "\n", encoding="utf-8")
    path.with_suffix(".md").write_text(reports.failover_page(updated), encoding="utf-8")
