"""Tasks of the dr_bringup DAG; each fails with one line saying what is wrong and where.

Every task takes the `plan` that `validate_topology` returns, one {"flow", "topology"} entry per selected
flow, so a run works from the inputs checked at its start; the entries are also the kwargs of the
per-flow mapped operators (ReplicationOperator, ReplicationLagSensor).
"""

from __future__ import annotations

import time
from typing import Any

from airflow.sdk import get_current_context, task
from airflow.sdk.exceptions import AirflowFailException
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from ..clients import ClientConfigError, error_text
from ..replication.heartbeat import HeartbeatError, send_heartbeat, wait_for_heartbeat
from ..replication.internal import ensure_internal_topics
from ..replication.topic_sync import TopicSyncError, load_flow_state, persist_flow_state, sync_topics
from ..schema_registry import auth_headers, first_url, get_json
from ..state import now_iso
from ..topology import Flow, Topology, TopologyError, load_topology
from .common import flow_clusters, selected_flows, write_report
from .hooks.kafka_cluster import ClusterUnreachable, KafkaClusterHook
from .hooks.schema_registry import load_registry_credentials

LEADER_WAIT = 15.0
"""Seconds a follower registry may take to see the leader (elections run on heartbeats)."""
NOT_EXPOSED = object()


@task
def validate_topology(params: dict[str, Any] | None = None) -> list[dict[str, str]]:
    """Check the run's params before anything changes: topology file, flow names, lag thresholds, and each
    cluster's client settings. Params: topology, flows (empty: all), max_lag_records, max_lag_seconds."""
    params = params or {}
    try:
        path, _, selected = selected_flows(params, "nothing to replicate")
        thresholds = {name: params.get(name) for name in ("max_lag_records", "max_lag_seconds")}
        for name, value in thresholds.items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value < 0):
                raise ValueError(f"param {name}: must be a number >= 0 or null, got {value!r}")
        if all(value is None for value in thresholds.values()):
            raise ValueError("params max_lag_records and max_lag_seconds: give at least one")
    except (TopologyError, ClientConfigError, ValueError) as exc:
        raise AirflowFailException(str(exc)) from None
    return [{"flow": flow.name, "topology": str(path)} for flow in selected]


@task
def clusters_reachable(plan: list[dict[str, str]], timeout: float = 10.0) -> dict[str, str]:
    """Every cluster answers, and no two topology entries are the same Kafka cluster (a copy onto itself)."""
    topo, flows = _load(plan)
    ids, problems = {}, []
    for cluster in flow_clusters(flows):
        try:
            ids[cluster] = _hook(topo, cluster).check_reachable(timeout)
        except ClusterUnreachable as exc:
            problems.append(str(exc))
    seen: dict[str, str] = {}
    for cluster, cluster_id in ids.items():
        if cluster_id in seen:
            problems.append(f"clusters {seen[cluster_id]} and {cluster} are the same Kafka cluster (id {cluster_id})")
        seen.setdefault(cluster_id, cluster)
    if problems:
        raise AirflowFailException("; ".join(problems))
    return ids


@task
def internal_topics(plan: list[dict[str, str]]) -> dict[str, list[str]]:
    """The `_kdr.` topics exist on every cluster of the run; returns the ones created now."""
    topo, flows = _load(plan)
    created = {}
    for cluster in flow_clusters(flows):
        try:
            created[cluster] = ensure_internal_topics(AdminClient(_hook(topo, cluster).client_config()))
        except KafkaException as exc:
            raise AirflowFailException(f"cluster {cluster}: cannot create internal topics: {error_text(exc)}") from None
    return created


@task
def destination_topics_synced(plan: list[dict[str, str]]) -> dict[str, dict[str, Any]]:
    """Each flow's destination topics exist with the source's partitions and topic configs."""
    topo, flows = _load(plan)
    reports = {}
    for flow in flows:
        source, target = _hook(topo, flow.source).client_config(), _hook(topo, flow.target).client_config()
        try:
            state = load_flow_state(target, flow.name)
            report = sync_topics(flow, AdminClient(source), AdminClient(target), flow_state=state)
            if report.flow_state != state:
                persist_flow_state(target, flow.name, report.flow_state)
        except TopicSyncError as exc:
            raise AirflowFailException(f"flow {flow.name}: {exc}") from None
        except KafkaException as exc:
            raise AirflowFailException(f"flow {flow.name}: topic sync failed: {error_text(exc)}") from None
        reports[flow.name] = {
            "created": report.created,
            "grown": report.grown,
            "changed_configs": report.changed_configs,
        }
    return reports


@task
def schema_registries_checked(plan: list[dict[str, str]]) -> dict[str, dict[str, Any]]:
    """Every registry of the run's clusters answers GET /subjects, and those that report their leader agree on
    one: the primary's registry when the topology names one."""
    topo, flows = _load(plan)
    urls = {
        c: first_url(topo.cluster(c).schema_registry) for c in flow_clusters(flows) if topo.cluster(c).schema_registry
    }
    load_registry_credentials(urls)
    result, problems = {}, []
    for cluster, url in urls.items():
        try:
            subjects = get_json(f"{url}/subjects", headers=auth_headers(cluster))
        except (OSError, ValueError) as exc:
            problems.append(f"schema registry of {cluster} ({url}) does not answer GET /subjects: {exc}")
            continue
        result[cluster] = {"url": url, "subjects": len(subjects), "leader": None}
    primary = topo.schema_registry_primary
    expected = urls.get(primary) if primary else None
    deadline = time.monotonic() + LEADER_WAIT
    while True:
        leaders = {c: leader for c, e in result.items() if (leader := _registry_leader(c, e["url"])) is not NOT_EXPOSED}
        named = set(leaders.values()) | ({expected} if expected and leaders else set())
        if (None not in named and len(named) <= 1) or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    for cluster, leader in leaders.items():
        result[cluster]["leader"] = leader
    if None in named:
        problems.append("schema registries without a leader: " + ", ".join(c for c, u in leaders.items() if u is None))
    elif len(named) > 1:
        want = f" (the primary is {primary}: {expected})" if expected else ""
        problems.append(
            "schema registries disagree on their leader"
            + want
            + ": "
            + ", ".join(f"{c} follows {u}" for c, u in leaders.items())
        )
    if problems:
        raise AirflowFailException("; ".join(problems))
    return result


@task
def heartbeat_round_trip(plan: list[dict[str, str]], timeout: float = 60.0) -> dict[str, float]:
    """A heartbeat produced into each flow's source arrives in its target; returns end-to-end seconds."""
    topo, flows = _load(plan)
    latencies = {}
    for flow in flows:
        try:
            heartbeat = send_heartbeat(_hook(topo, flow.source).client_config(), flow.name)
            latencies[flow.name] = wait_for_heartbeat(_hook(topo, flow.target).client_config(), heartbeat, timeout)
        except (HeartbeatError, TimeoutError) as exc:
            raise AirflowFailException(str(exc)) from None
    return latencies


@task
def report(plan: list[dict[str, str]], results: dict[str, Any]) -> dict[str, Any]:
    """Write what the run did and measured to STATE_DIR/reports/<dag>-<run>.json, and return it."""
    context = get_current_context()
    dag_id, run_id = context["dag"].dag_id, context["run_id"]
    body = {
        "dag_id": dag_id,
        "run_id": run_id,
        "finished_at": now_iso(),
        "params": dict(context["params"]),
        "plan": list(plan),
        **{key: list(value) if _is_sequence(value) else value for key, value in results.items()},
    }
    return write_report(dag_id, run_id, body)


def _load(plan: list[dict[str, str]]) -> tuple[Topology, list[Flow]]:
    topo = load_topology(plan[0]["topology"])
    return topo, [topo.flow(entry["flow"]) for entry in plan]


def _hook(topo: Topology, cluster: str) -> KafkaClusterHook:
    return KafkaClusterHook(cluster, topology=topo)


def _registry_leader(cluster: str, url: str) -> str | None | object:
    """The leader URL a registry reports (the local stack's GET /kdr/leader; None while it has none), or
    NOT_EXPOSED for registries without that endpoint, such as Confluent's."""
    try:
        leader = get_json(f"{url}/kdr/leader", headers=auth_headers(cluster)).get("leader")
    except (OSError, ValueError, AttributeError):
        return NOT_EXPOSED
    return leader.rstrip("/") if isinstance(leader, str) else None


def _is_sequence(value: Any) -> bool:
    return not isinstance(value, str | bytes | dict) and hasattr(value, "__iter__")
