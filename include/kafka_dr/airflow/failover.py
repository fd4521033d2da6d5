"""Tasks of the dr_failover and dr_schema_redirect DAGs (the white paper's "When Disaster Strikes").

dr_failover: validate -> (planned: switch producers -> lag 0) -> stop replication from the failed side
-> translate and apply offsets -> schema redirect -> switch consumers -> verify -> report. Every task
returns when it started and ended, so the report shows each step's timing and the RTO (run start to
clients switched). Validation runs first and changes nothing.
"""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from typing import Any

from airflow.sdk import get_current_context, task
from airflow.sdk.exceptions import AirflowFailException
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient

from .. import client_switch
from ..clients import ClientConfigError
from ..replication import replicators
from ..replication.lag import LagError, flow_lag, load_snapshot
from ..schema_registry import RegistryError, redirect
from ..state import now_iso, report_path
from ..topology import Topology, TopologyError, load_topology
from ..translation.offsets import parse_reset_time
from . import topology_path
from .hooks.kafka_cluster import ClusterUnreachable, KafkaClusterHook

MODES = ("planned", "disaster")


def _now() -> str:
    return now_iso("milliseconds")


def _move_reason(dag_id: str, run_id: str, mode: str, step: str) -> str:
    """How a client move is recorded; the report finds this run's producer moves by it."""
    return f"{dag_id} {run_id} ({mode}, {step})"


@task
def validate_failover(params: dict[str, Any] | None = None) -> dict[str, Any]:
    """Check every param before anything changes; returns the run's plan."""
    started = _now()
    params = params or {}
    try:
        path = topology_path(params.get("topology"))
        topo = load_topology(path)
        failed, target, mode = params.get("failed_cluster"), params.get("target_cluster"), params.get("mode")
        topo.cluster(str(failed))
        topo.cluster(str(target))
        if failed == target:
            raise ValueError(f"params failed_cluster and target_cluster are both {failed!r}")
        if mode not in MODES:
            raise ValueError(f"param mode: must be one of {', '.join(MODES)}, got {mode!r}")
        groups = params.get("groups") or ".*"
        try:
            re.compile(groups)
        except re.error as exc:
            raise ValueError(f"param groups: bad regex {groups!r}: {exc}") from None
        reset = params.get("reset_to_datetime") or None
        if reset is not None:
            parse_reset_time(reset)
        flows = [f.name for f in topo.flows if f.source == failed and f.target == target]
        if not flows:
            raise ValueError(f"no flow replicates {failed} into {target}: there is nothing to fail over to")
        for cluster in (failed, target):
            KafkaClusterHook(cluster, topology=topo).security_settings()
        if mode == "planned":
            try:
                KafkaClusterHook(failed, topology=topo).check_reachable(10)
            except ClusterUnreachable as exc:
                raise ValueError(f"a planned failover needs {failed} reachable ({exc}); use mode disaster") from None
    except (TopologyError, ClientConfigError, ValueError) as exc:
        raise AirflowFailException(str(exc)) from None
    stopped = [f.name for f in topo.flows if failed in (f.source, f.target)]
    return {"topology": str(path), "failed": failed, "target": target, "mode": mode, "groups": groups,
            "reset_to_datetime": reset, "flows": flows, "stop_flows": stopped,
            "drain": [{"flow": name, "topology": str(path)} for name in flows],
            "translate": [{"flow": name, "topology": str(path), "groups": groups,
                           "from_checkpoints": mode == "disaster", "reset_to_datetime": reset} for name in flows],
            "step": {"started": started, "ended": _now()}}


@task
def flows_to_drain(plan: dict[str, Any]) -> list[dict[str, str]]:
    """Kwargs of the mapped lag gate (planned mode): one per flow from the failed cluster to the target."""
    return plan["drain"]


@task(trigger_rule="none_failed_min_one_success")
def translation_kwargs(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Kwargs of the mapped offset translation: one per flow, from checkpoints in a disaster."""
    return plan["translate"]


@task.branch
def choose_mode(plan: dict[str, Any]) -> str:
    """planned: producers move first and the lag drains to 0; disaster: straight to stopping replication."""
    return "switch_producers" if plan["mode"] == "planned" else "stop_replication"


@task
def switch_producers(plan: dict[str, Any]) -> dict[str, Any]:
    """Planned failover: producers of the failed cluster write to the target from now on."""
    return _switch(plan, roles=("producer",), step="switch_producers")


@task(trigger_rule="none_failed_min_one_success")
def stop_replication(plan: dict[str, Any]) -> dict[str, Any]:
    """Stop the tracked replicators of every flow from or into the failed cluster."""
    started = _now()
    stopped = {}
    for flow in plan["stop_flows"]:
        final = replicators.stop(flow)
        stopped[flow] = "not running" if final is None else ("stopped" if not final.running else "still running")
    return {"replicators": stopped, "step": {"started": started, "ended": _now()}}


@task
def redirect_schema_registry(plan: dict[str, Any]) -> dict[str, Any]:
    """When the failed cluster held the primary registry, make the target's registry lead on its own store."""
    started = _now()
    topo = load_topology(plan["topology"])
    result: dict[str, Any]
    if topo.schema_registry_primary != plan["failed"]:
        result = {"skipped": f"the primary registry is {topo.schema_registry_primary or 'not set'}, "
                             f"not on {plan['failed']}"}
    elif topo.cluster(plan["target"]).schema_registry is None:
        result = {"skipped": f"cluster {plan['target']} has no schema registry"}
    else:
        try:
            result = redirect(topo, plan["target"], plan["target"], leader_eligible=True).to_dict()
        except RegistryError as exc:
            raise AirflowFailException(str(exc)) from None
    return {**result, "step": {"started": started, "ended": _now()}}


@task
def switch_consumers(plan: dict[str, Any]) -> dict[str, Any]:
    """Every remaining client of the failed cluster moves to the target: the end of the RTO."""
    return _switch(plan, roles=("producer", "consumer", "both"), step="switch_consumers")


def _switch(plan: dict[str, Any], roles: tuple[str, ...], step: str) -> dict[str, Any]:
    started = _now()
    topo = load_topology(plan["topology"])
    context = get_current_context()
    aliases = [s.alias for s in client_switch.states(topo) if s.active == plan["failed"] and s.role in roles]
    reason = _move_reason(context["dag"].dag_id, context["run_id"], plan["mode"], step)
    moves = client_switch.switch(topo, aliases, plan["target"], reason)
    return {"moved": [m.alias for m in moves], "step": {"started": started, "ended": _now()}}


@task
def verify_failover(plan: dict[str, Any], translations: list[dict[str, Any]]) -> dict[str, Any]:
    """Applied groups hold the translated offsets in the target, and no client is left on the failed cluster."""
    started = _now()
    topo = load_topology(plan["topology"])
    admin = AdminClient(KafkaClusterHook(plan["target"], topology=topo).client_config())
    problems, checked = [], 0
    for summary in translations:
        for group in summary.get("applied", []):
            expected = {(t["dest_topic"], t["partition"]): t["dest_offset"] for t in summary["groups"][group]}
            result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
            actual = {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions or [] if tp.offset >= 0}
            if any(actual.get(key) != offset for key, offset in expected.items()):
                problems.append(f"group {group}: committed {actual} in {plan['target']}, expected {expected}")
            checked += 1
    left = [s.alias for s in client_switch.states(topo) if s.active == plan["failed"]]
    if left:
        problems.append(f"clients still on {plan['failed']}: {', '.join(left)}")
    if problems:
        raise AirflowFailException("; ".join(problems))
    return {"groups_checked": checked, "step": {"started": started, "ended": _now()}}


def rpo(topo: Topology, flows: list[str]) -> dict[str, Any]:
    """Records committed in the failed cluster but not replicated, per topic: measured now when the source
    answers (exact), else the last lag snapshot kept in the target (an estimate as of its time)."""
    per_topic: dict[str, int] = {}
    sources = {}
    for name in flows:
        flow = topo.flow(name)
        try:
            lag, exact = flow_lag(topo, name, timeout=5.0), True
        except LagError:
            lag = load_snapshot(KafkaClusterHook(flow.target, topology=topo).client_config(), name)
            exact = False
        if lag is None:
            sources[name] = {"exact": False, "measured_at_ms": None, "note": "source unreachable and no snapshot"}
            continue
        sources[name] = {"exact": exact, "measured_at_ms": lag.measured_at_ms}
        for partition in lag.partitions:
            if partition.topic.startswith("_kdr."):
                continue
            per_topic[partition.topic] = per_topic.get(partition.topic, 0) + partition.lag_records
    known = all(s["measured_at_ms"] is not None for s in sources.values())
    return {"records": sum(per_topic.values()) if known else None, "per_topic": per_topic,
            "exact": known and all(s["exact"] for s in sources.values()), "flows": sources}


@task(trigger_rule="none_failed_min_one_success")
def failover_report(plan: dict[str, Any], results: dict[str, Any]) -> dict[str, Any]:
    """RPO, RTO, groups translated and skipped, registry state and every step's timing, as JSON and as a
    readable page in STATE_DIR/reports/."""
    context = get_current_context()
    dag_run = context["dag_run"]
    run_start = dag_run.start_date or datetime.fromisoformat(plan["step"]["started"])
    topo = load_topology(plan["topology"])
    switched = results.get("switch_consumers") or {}
    rto = None
    if switched.get("step"):
        rto = round((datetime.fromisoformat(switched["step"]["ended"]) - run_start).total_seconds(), 3)
    translations = results.get("translations") or []
    groups = {"translated": sum(t.get("group_count", 0) for t in translations),
              "applied": sorted(g for t in translations for g in t.get("applied", [])),
              "skipped": [s for t in translations for s in t.get("skipped", [])]}
    steps = {"validate": plan["step"]}
    steps.update({name: value["step"] for name, value in results.items()
                  if isinstance(value, dict) and "step" in value})
    steps.update({f"translate_offsets {t.get('flow')}": {"seconds": t.get("seconds")} for t in translations})
    body = {"dag_id": context["dag"].dag_id, "run_id": context["run_id"], "failed_cluster": plan["failed"],
            "target_cluster": plan["target"], "mode": plan["mode"], "run_started": run_start.isoformat(),
            "rpo": rpo(topo, plan["flows"]), "rto_seconds": rto, "groups": groups,
            "schema_registry": results.get("schema_registry"), "clients": {
                "producers_first": [m.alias for m in client_switch.history() if m.reason == _move_reason(
                    context["dag"].dag_id, context["run_id"], "planned", "switch_producers")],
                "moved": switched.get("moved", [])}, "steps": steps}
    path = report_path(body["dag_id"], body["run_id"])
    path.write_text(json.dumps(body, indent=2, default=str) + "\n", encoding="utf-8")
    report_path(body["dag_id"], body["run_id"], ".md").write_text(_page(body), encoding="utf-8")
    return {**body, "report_file": str(path)}


def _page(body: dict[str, Any]) -> str:
    rpo_ = body["rpo"]
    rpo_text = "unknown" if rpo_["records"] is None else f"{rpo_['records']} records"
    rpo_kind = "exact" if rpo_["exact"] else "estimate from the last lag measurement"
    lines = [f"# Failover {body['failed_cluster']} -> {body['target_cluster']} ({body['mode']})", "",
             f"- run `{body['run_id']}`, started {body['run_started']}",
             f"- **RPO: {rpo_text}** ({rpo_kind})"
             + "".join(f"; {topic}: {n}" for topic, n in sorted(rpo_["per_topic"].items())),
             f"- **RTO: {body['rto_seconds']} s** (trigger to clients switched)",
             f"- groups translated: {body['groups']['translated']}, applied: {len(body['groups']['applied'])}, "
             f"left alone: {len(body['groups']['skipped'])}"]
    lines += [f"  - {s['group']}: {s['reason']}" for s in body["groups"]["skipped"]]
    lines += [f"- schema registry: {json.dumps(body['schema_registry'], default=str)}",
              f"- clients moved: {', '.join(body['clients']['producers_first'] + body['clients']['moved']) or 'none'}",
              "", "| step | started | ended | seconds |", "|---|---|---|---|"]
    lines += [f"| {name} | {step.get('started', '')} | {step.get('ended', '')} | {_seconds(step)} |"
              for name, step in body["steps"].items()]
    return "\n".join(lines) + "\n"


def _seconds(step: dict[str, Any]) -> str:
    if "seconds" in step:
        return str(step["seconds"])
    return str(round((datetime.fromisoformat(step["ended"]) - datetime.fromisoformat(step["started"])).total_seconds(),
                     3))


@task
def validate_redirect(params: dict[str, Any] | None = None) -> dict[str, Any]:
    """dr_schema_redirect: check the params before anything changes."""
    params = params or {}
    try:
        path = topology_path(params.get("topology"))
        topo = load_topology(path)
        registry, store = params.get("registry_cluster"), params.get("store_cluster")
        if topo.cluster(str(registry)).schema_registry is None:
            raise ValueError(f"param registry_cluster: cluster {registry} has no schema_registry URL")
        topo.cluster(str(store))
        eligible = params.get("leader_eligible")
        if not isinstance(eligible, bool):
            raise ValueError(f"param leader_eligible: must be true or false, got {eligible!r}")
    except (TopologyError, ValueError) as exc:
        raise AirflowFailException(str(exc)) from None
    return {"topology": str(path), "registry": registry, "store": store, "leader_eligible": eligible}


@task
def redirect_registry(plan: dict[str, Any]) -> dict[str, Any]:
    started = time.monotonic()
    try:
        result = redirect(load_topology(plan["topology"]), plan["registry"], plan["store"], plan["leader_eligible"])
    except RegistryError as exc:
        raise AirflowFailException(str(exc)) from None
    return {**result.to_dict(), "task_seconds": round(time.monotonic() - started, 3)}
