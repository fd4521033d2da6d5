"""What dr_bringup makes sure of, cluster by cluster and flow by flow: the clusters are distinct Kafka clusters, the
internal topics and the destination topics exist, the schema registries agree on one leader, and a heartbeat crosses
each flow, each cluster reached through the caller's ClusterAccess; a problem raises BringupError with one line."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from ..access import ClusterAccess
from ..clients import error_text
from ..replication.heartbeat import HeartbeatError, send_heartbeat, wait_for_heartbeat
from ..replication.internal import ensure_internal_topics
from ..replication.topic_sync import TopicSyncError, load_flow_state, persist_flow_state, sync_topics
from ..schema_registry import first_url, get_json
from ..topology import Flow, Topology

LEADER_WAIT = 15.0
"""Seconds a follower registry may take to see the leader (elections run on heartbeats)."""
NOT_EXPOSED = object()


class BringupError(RuntimeError):
    """A check failed; one line saying what is wrong and where."""


def same_clusters(cluster_ids: Mapping[str, str]) -> list[str]:
    """A line per topology entry that is the same Kafka cluster as an earlier one (a copy onto itself)."""
    seen: dict[str, str] = {}
    problems = []
    for cluster, cluster_id in cluster_ids.items():
        if cluster_id in seen:
            problems.append(f"clusters {seen[cluster_id]} and {cluster} are the same Kafka cluster (id {cluster_id})")
        seen.setdefault(cluster_id, cluster)
    return problems


def create_internal_topics(clusters: Iterable[str], access: ClusterAccess) -> dict[str, list[str]]:
    """The `_kdr.` topics exist on every cluster; returns the ones created now."""
    created = {}
    for cluster in clusters:
        try:
            created[cluster] = ensure_internal_topics(access.admin(cluster))
        except KafkaException as exc:
            raise BringupError(f"cluster {cluster}: cannot create internal topics: {error_text(exc)}") from None
    return created


def sync_destination_topics(flows: Iterable[Flow], access: ClusterAccess) -> dict[str, dict[str, Any]]:
    """Each flow's destination topics exist with the source's partitions and topic configs; what was done."""
    synced = {}
    for flow in flows:
        source, target = access.config(flow.source), access.config(flow.target)
        try:
            state = load_flow_state(target, flow.name)
            report = sync_topics(flow, AdminClient(source), AdminClient(target), flow_state=state)
            if report.flow_state != state:
                persist_flow_state(target, flow.name, report.flow_state)
        except TopicSyncError as exc:
            raise BringupError(f"flow {flow.name}: {exc}") from None
        except KafkaException as exc:
            raise BringupError(f"flow {flow.name}: topic sync failed: {error_text(exc)}") from None
        synced[flow.name] = {
            "created": report.created,
            "grown": report.grown,
            "changed_configs": report.changed_configs,
        }
    return synced


def registry_urls(topo: Topology, clusters: Iterable[str]) -> dict[str, str]:
    """The schema registry of each of `clusters` that has one (its first URL)."""
    return {c: first_url(topo.cluster(c).schema_registry) for c in clusters if topo.cluster(c).schema_registry}


def check_registries(
    access: ClusterAccess, urls: Mapping[str, str], wait: float = LEADER_WAIT
) -> dict[str, dict[str, Any]]:
    """Every registry answers GET /subjects, and those that report their leader agree on one, the primary's
    registry when the topology names one (waiting up to `wait` seconds for followers to see the leader)."""
    result, problems = {}, []
    for cluster, url in urls.items():
        try:
            subjects = get_json(f"{url}/subjects", headers=access.registry_headers(cluster))
        except (OSError, ValueError) as exc:
            problems.append(f"schema registry of {cluster} ({url}) does not answer GET /subjects: {exc}")
            continue
        result[cluster] = {"url": url, "subjects": len(subjects), "leader": None}
    primary = access.topology.schema_registry_primary
    expected = urls.get(primary) if primary else None
    deadline = time.monotonic() + wait
    while True:
        leaders = {
            c: leader
            for c, e in result.items()
            if (leader := registry_leader(e["url"], access.registry_headers(c))) is not NOT_EXPOSED
        }
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
        raise BringupError("; ".join(problems))
    return result


def registry_leader(url: str, headers: Mapping[str, str]) -> str | None | object:
    """The leader URL a registry reports (the local stack's GET /kdr/leader; None while it has none), or
    NOT_EXPOSED for registries without that endpoint, such as Confluent's."""
    try:
        leader = get_json(f"{url}/kdr/leader", headers=headers).get("leader")
    except (OSError, ValueError, AttributeError):
        return NOT_EXPOSED
    return leader.rstrip("/") if isinstance(leader, str) else None


def heartbeat_round_trips(flows: Iterable[Flow], access: ClusterAccess, timeout: float) -> dict[str, float]:
    """A heartbeat produced into each flow's source arrives in its target; end-to-end seconds per flow."""
    latencies = {}
    for flow in flows:
        try:
            heartbeat = send_heartbeat(access.config(flow.source), flow.name)
            latencies[flow.name] = wait_for_heartbeat(access.config(flow.target), heartbeat, timeout)
        except (HeartbeatError, TimeoutError) as exc:
            raise BringupError(str(exc)) from None
    return latencies
