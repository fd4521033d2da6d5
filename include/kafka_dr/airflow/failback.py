"""Tasks of the dr_failback DAG (seeds 001 and 004: bringing the failed cluster back after a failover).

validate -> measure what never left the restored cluster (the exact RPO of the disaster; the failover report this
failback follows gains the figure) -> decide: the report is written, and the run stops there on a dry run, or when
records never left and `unreplicated` is `report` (nothing changed; one line says how to continue) -> resync (the
serving cluster's records into the restored one, by the flows back or the inverse of the flows out) -> the switch
back, a planned failover in reverse made of dr_failover's own tasks (producers back, catch-up resync, lag 0, the
unreplicated records republished or discarded, offsets translated back, registry back, consumers back) -> every flow
of the topology resumed -> verify -> report. Every task is timed (`timed`) for the report's step table. Validation
runs first and changes nothing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from airflow.sdk import get_current_context, task
from airflow.sdk.exceptions import AirflowFailException
from confluent_kafka import IsolationLevel, KafkaException
from confluent_kafka.admin import AdminClient

from .. import reports
from ..clients import ClientConfigError, end_offsets, error_text
from ..failback import republish as republishing
from ..failback.resync import resync_flows
from ..failback.unreplicated import MeasureError, Unreplicated, UnreplicatedRange, measure
from ..schema_registry import RegistryError, redirect
from ..state import subdir
from ..topology import INTERNAL_TOPIC_PREFIX, TopologyError, load_topology
from . import topology_path
from .common import boolean_param, choice_param, groups_param, timed, write_report
from .failover import check_groups_and_clients
from .hooks.kafka_cluster import ClusterUnreachable, KafkaClusterHook
from .hooks.schema_registry import load_registry_credentials

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
        mode = choice_param(params, "mode", MODES)
        action = choice_param(params, "unreplicated", ACTIONS)
        groups = groups_param(params)
        dry_run = boolean_param(params, "dry_run", default=False)
        out_of = [f.name for f in topo.flows if f.source == restored and f.target == serving]
        back = [f.name for f in topo.flows if f.source == serving and f.target == restored]
        if not out_of and not back:
            raise ValueError(f"no flow between {restored} and {serving} either way: there is nothing to fail back")
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
    return {
        "topology": str(path),
        "restored": restored,
        "restored_cluster_id": cluster_ids[restored],
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


@task.short_circuit
def decide(plan: dict[str, Any], measured: dict[str, Any]) -> dict[str, Any] | bool:
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
    return False if plan["dry_run"] else written  # False: a dry run ends here, every later step skipped


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


@task
@timed
def prepare_switch_back(plan: dict[str, Any]) -> dict[str, Any]:
    """The flows that resync (the topology's flows back, and the inverses of the flows out for the serving cluster's
    topics no flow back covers, in a derived topology file under the state dir: kafka_dr.failback.resync) and the
    switch back as dr_failover's tasks take it: a planned failover from the serving cluster to the restored one,
    moving only the aliases at home in the restored cluster. data_lost: the resync forces the copy of the records
    that first came from the restored cluster (DESIGN.md's filter override, up to the run's start), which the cycle
    rule refuses when the restored cluster came back with its old cluster id."""
    context = get_current_context()
    run_id = context["run_id"]
    derived = subdir("failback") / f"{re.sub(r'[^A-Za-z0-9._-]', '_', run_id)}.topology.yaml"
    hook = KafkaClusterHook(plan["serving"], topology=load_topology(plan["topology"]))
    try:
        serving_topics = AdminClient(hook.client_config()).list_topics(timeout=30).topics
        topology, flows, inverse = resync_flows(
            Path(plan["topology"]), plan["restored"], plan["serving"], serving_topics, derived
        )
    except TopologyError as exc:
        raise AirflowFailException(str(exc)) from None
    except KafkaException as exc:
        raise AirflowFailException(f"cluster {plan['serving']}: list topics failed: {error_text(exc)}") from None
    each = [{"flow": name, "topology": str(topology)} for name in flows]
    force = None
    if plan["mode"] == "data_lost":
        force = {"cluster": re.escape(plan["restored_cluster_id"]), "to": context["dag_run"].start_date.isoformat()}
    return {
        "topology": str(topology),
        "failed": plan["serving"],
        "target": plan["restored"],
        "home": plan["restored"],
        "mode": "planned",
        "groups": plan["groups"],
        "flows": flows,
        "inverse_flows": inverse,
        "force": force,
        "gate": each,
        "resync": [{**one, "force": force} for one in each],
        "translate": [
            {**one, "groups": plan["groups"], "from_checkpoints": False, "reset_to_datetime": None} for one in each
        ],
    }


@task
def resync_kwargs(back: dict[str, Any]) -> list[dict[str, Any]]:
    """Kwargs of the mapped resync runs: one per flow into the restored cluster, with the override of data_lost."""
    return back["resync"]


@task
def gate_kwargs(back: dict[str, Any]) -> list[dict[str, str]]:
    """Kwargs of the mapped lag gate: one per flow into the restored cluster."""
    return back["gate"]


@task
def mark_restored_ends(back: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Per resync flow, the end offsets of its destination partitions in the restored cluster just before producers
    move back. From there, a record that is not a copy from the serving cluster (what the moved producers write,
    interleaved with the last copies of the resync) was never seen by the groups reading the serving cluster:
    translating back, a group resumes no later than the first of them, so none is skipped (the copies after it
    are read twice). Only the flows' own partitions: the mapping goes on each translation job's command line."""
    topology = load_topology(back["topology"])
    serving = AdminClient(KafkaClusterHook(back["failed"], topology=topology).client_config())
    restored = AdminClient(KafkaClusterHook(back["target"], topology=topology).client_config())
    try:
        serving_topics = serving.list_topics(timeout=30).topics
        restored_topics = restored.list_topics(timeout=30).topics
        destinations = {
            name: {flow.destination_topic(t) for t in serving_topics if flow.topics.matches(t)} & set(restored_topics)
            for name in back["flows"]
            for flow in (topology.flow(name),)
        }
        partitions = [(t, p) for t in set().union(*destinations.values()) for p in restored_topics[t].partitions]
        ends = end_offsets(restored, partitions, IsolationLevel.READ_UNCOMMITTED) if partitions else {}
    except KafkaException as exc:
        raise AirflowFailException(f"failback: end offsets not read: {error_text(exc)}") from None
    return {
        name: {f"{t}:{p}": end for (t, p), end in sorted(ends.items()) if t in topics}
        for name, topics in destinations.items()
    }


@task
def translate_back_kwargs(back: dict[str, Any], mark: dict[str, dict[str, int]]) -> list[dict[str, Any]]:
    """Kwargs of the mapped offset translation back: one per resync flow, planned (from the serving cluster), with
    the restored cluster's ends of its partitions before producers moved back as `unseen_from`."""
    return [{**one, "unseen_from": mark[one["flow"]]} for one in back["translate"]]


@task
@timed
def handle_unreplicated(plan: dict[str, Any], measured: dict[str, Any]) -> dict[str, Any]:
    """republish: the records that never left are produced again at the end of their partitions in the restored
    cluster, after the resynced copies, where the groups moved back read next; discard: left unread. Either way
    the flows out move past the originals, so they are never copied (kafka_dr.failback.republish)."""
    unreplicated = measured["unreplicated"]
    if not unreplicated.get("ranges"):
        return {"action": plan["unreplicated"], "records": 0}
    found = Unreplicated(
        plan["restored"],
        plan["serving"],
        tuple(unreplicated["flows"]),
        tuple(UnreplicatedRange(**r) for r in unreplicated["ranges"]),
        (),
    )
    topo = load_topology(plan["topology"])
    republished = republishing.republish(topo, found) if plan["unreplicated"] == "republish" else 0
    moved = republishing.skip_originals(topo, found)
    return {"action": plan["unreplicated"], "records": found.records, "republished": republished, "flows_moved": moved}


@task
@timed
def registry_back(plan: dict[str, Any]) -> dict[str, Any]:
    """When the topology's primary registry is on the restored cluster: it leads on its own store again, and the
    serving cluster's registry follows that store (the reverse of dr_failover's redirect)."""
    topo = load_topology(plan["topology"])
    primary = topo.schema_registry_primary
    if primary != plan["restored"]:
        return {"skipped": f"the primary registry is {primary or 'not set'}, not on {plan['restored']}"}
    results = {}
    load_registry_credentials([primary, plan["serving"]])
    try:
        results["primary"] = redirect(topo, primary, primary, leader_eligible=True).to_dict()
        if topo.cluster(plan["serving"]).schema_registry is not None:
            results["follower"] = redirect(topo, plan["serving"], primary, leader_eligible=False).to_dict()
    except RegistryError as exc:
        raise AirflowFailException(str(exc)) from None
    return results


@task
def resume_kwargs(plan: dict[str, Any]) -> list[dict[str, str]]:
    """Kwargs of the mapped continuous replicators: every flow of the topology."""
    return [{"flow": f.name, "topology": plan["topology"]} for f in load_topology(plan["topology"]).flows]


VERIFY_SETTLE_S = 60.0  # the flows run again while they are verified: time for a record produced meanwhile


@task
def verify_kwargs(plan: dict[str, Any], back: dict[str, Any], measured: dict[str, Any]) -> list[dict[str, Any]]:
    """Kwargs of the mapped verify jobs: every flow of the topology and every inverse made for the resync, so each
    cluster is checked per origin. The flows out skip the unreplicated ranges handled (republished copies stand for
    them, or they stay unread); the resync flows carry the override they were copied with."""
    ranges = measured["unreplicated"].get("ranges") or []
    resyncing = set(back["flows"])
    kwargs = []
    for flow in load_topology(back["topology"]).flows:
        skip = [
            f"{r['topic']}:{r['partition']}:{r['from_offset']}-{r['to_offset']}"
            for r in ranges
            if r["flow"] == flow.name
        ]
        kwargs.append(
            {
                "flow": flow.name,
                "topology": back["topology"],
                "skip": skip,
                "settle": VERIFY_SETTLE_S,
                "force": back["force"] if flow.name in resyncing else None,
            }
        )
    return kwargs


@task
@timed
def verify_failback(
    back: dict[str, Any], translations: list[dict[str, Any]], verifications: list[dict[str, Any]]
) -> dict[str, Any]:
    """Every group moved back holds its translated offsets in the restored cluster and no alias at home there is
    left on the serving cluster; with the verify jobs (each fails its own task on a record missing, duplicated or
    changed), what each flow holds."""
    problems, checked = check_groups_and_clients(load_topology(back["topology"]), back, translations)
    if problems:
        raise AirflowFailException("; ".join(problems))
    flows = {v["flow"]: {k: v[k] for k in ("expected", "copied", "filtered", "skipped")} for v in verifications or []}
    return {"groups_checked": checked, "flows": flows}


@task(trigger_rule="none_failed_min_one_success")
def failback_report(plan: dict[str, Any], results: dict[str, Any]) -> dict[str, Any]:
    """What never left, what was done with it, records resynced, RTO and every step's timing, as JSON and as a
    page in STATE_DIR/reports/ (built by kafka_dr.reports)."""
    context = get_current_context()
    dag_id, run_id = context["dag"].dag_id, context["run_id"]
    runs = [*(results.pop("resync_runs", None) or []), *(results.pop("catch_up_runs", None) or [])]
    copied = [p for r in runs for p in r.get("partitions", []) if not p["topic"].startswith(INTERNAL_TOPIC_PREFIX)]
    results["resync"] = {"records": sum(p["records"] for p in copied)}  # data records: heartbeats are not counted
    body = reports.failback_report(
        plan, results, dag_id=dag_id, run_id=run_id, run_started=context["dag_run"].start_date
    )
    return write_report(dag_id, run_id, body, reports.failback_page(body))
