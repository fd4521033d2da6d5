"""What the Kafka DR dashboard shows, as one plain dict: the page is drawn from it and /kafka-dr/api/state returns it.

Sources: the topology; each cluster asked for its id (reachability) and its schema registry for its role; each flow's
latest `dr_replication_health` evaluation (STATE_DIR/health/<flow>.json) and its earlier ones, read back from the
target's `_kdr.health` for the lag chart; the client aliases' active clusters; the newest failover, failback and
backfill reports; the failovers whose failback is pending (kafka_dr.roles); the newest health run's readiness
(STATE_DIR/readiness.json); the drills done
(kafka_dr.drill.history); the newest alerts sent. Each source fails on its own (a topology that does not load, a
cluster that does not answer, a report that does not parse) and shows as a one-line error in its place, so a bad day
never blanks the page; no cluster or registry is waited on much longer than `timeout`. No Airflow import: the CLI and
tests use it as is.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from confluent_kafka import IsolationLevel, KafkaException, Message
from confluent_kafka.admin import AdminClient

from .. import client_switch, readiness, roles
from ..access import ClusterAccess
from ..alerts import sent_log
from ..clients import end_offsets, error_text, read_committed, start_offset
from ..drill.history import drill_history
from ..health.sampler import evaluation_key
from ..health.snapshots import snapshot_path
from ..paths import default_topology
from ..replication.internal import HEALTH
from ..reports import latest_reports
from ..schema_registry import registry_role
from ..state import now_iso
from ..topology import Cluster, Topology, TopologyError, load_topology

log = logging.getLogger(__name__)

TIMEOUT_S = 2.0
HISTORY_RECORDS = 400  # newest `_kdr.health` records read per target: ~16 hours of a lone flow's 5-minute runs
HISTORY_POINTS = 120  # evaluations charted per flow
DRILLS_SHOWN = 48  # newest drills listed and charted: two years of a monthly drill of each of the two scenarios

History = tuple[dict[str, list[dict[str, Any]]], str | None]  # chart points by flow, and why some may be missing


def collect_view(
    topology_path: str | Path | None = None, access: ClusterAccess | None = None, timeout: float = TIMEOUT_S
) -> dict[str, Any]:
    """What the dashboard shows now. `access`: the clusters of its topology as the Airflow plugin reaches them (its
    connections); without it the topology at `topology_path` (None: $KDR_TOPOLOGY, else include/topology.yaml),
    reached with this process's environment."""
    started = time.monotonic()
    path = default_topology() if topology_path is None else Path(topology_path)
    view: dict[str, Any] = {
        "generated_at": now_iso(),
        "topology": {"path": str(path), "error": None},
        "clusters": [],
        "flows": [],
        "clients": [],
        "clients_error": None,
        "reports": latest_reports(),
        "drills": drill_history(DRILLS_SHOWN),
        "alerts": sent_log(10),
        "readiness": readiness.load(),
        "failed_over": [{**asdict(entry), "line": entry.line()} for entry in roles.pending().values()],
    }
    try:
        topology = load_topology(path) if access is None else access.topology
    except TopologyError as exc:
        view["topology"]["error"] = str(exc)
    else:
        view["clusters"], histories = _clusters(topology, access, timeout)
        view["flows"] = [
            _flow(flow.name, flow.source, flow.target, histories.get(flow.target)) for flow in topology.flows
        ]
        view["clients"], view["clients_error"] = _clients(topology)
    view["collected_in_s"] = round(time.monotonic() - started, 3)
    return view


def _clusters(
    topology: Topology, access: ClusterAccess | None, timeout: float
) -> tuple[list[dict[str, Any]], dict[str, History]]:
    """Every cluster and its registry asked at once; the `_kdr.health` history read from each reachable target. When
    the clusters' settings do not load (a bad KDR_CLUSTER_<NAME>_CONFIG), each cluster shows that error."""
    reach: ClusterAccess | ValueError
    try:
        reach = access or ClusterAccess.from_environ(topology)
    except ValueError as exc:  # ClientConfigError
        reach = exc
    targets = {flow.target for flow in topology.flows}
    flows_by_target = {t: [f.name for f in topology.flows if f.target == t] for t in targets}
    clusters = list(topology.clusters.values())
    with ThreadPoolExecutor(max_workers=2 * len(clusters) or 1, thread_name_prefix="kdr-dashboard") as pool:
        kafka = [pool.submit(_kafka, reach, c, flows_by_target.get(c.name, []), timeout) for c in clusters]
        registries = [
            pool.submit(registry_role, c.schema_registry, timeout, _registry_headers(reach, c.name)) for c in clusters
        ]
        primary = topology.schema_registry_primary
        rows, histories = [], {}
        for cluster, asked, registry in zip(clusters, kafka, registries, strict=True):
            found, history = asked.result()
            rows.append(
                {
                    "name": cluster.name,
                    "bootstrap_servers": cluster.bootstrap_servers,
                    **found,
                    "schema_registry": {**registry.result(), "primary": primary == cluster.name},
                }
            )
            if cluster.name in targets:
                histories[cluster.name] = history or ({}, f"no history: {cluster.name} unreachable")
    return rows, histories


def _registry_headers(access: ClusterAccess | ValueError, cluster: str) -> dict[str, str]:
    return {} if isinstance(access, ValueError) else access.registry_headers(cluster)


def _kafka(
    access: ClusterAccess | ValueError, cluster: Cluster, flows: list[str], timeout: float
) -> tuple[dict[str, Any], History | None]:
    """Whether the cluster answers and its id; when it answers and is the target of `flows`, their history."""
    try:
        if isinstance(access, ValueError):
            raise access
        config = {**access.config(cluster.name), "logger": log}
        admin = AdminClient(config)
        cluster_id = admin.describe_cluster(request_timeout=timeout).result().cluster_id
    except (KafkaException, ValueError) as exc:  # ValueError: a bad KDR_CLUSTER_<NAME>_CONFIG
        return {"reachable": False, "cluster_id": None, "error": error_text(exc)}, None
    found = {"reachable": True, "cluster_id": cluster_id, "error": None}
    return found, (_read_history(admin, config, flows, timeout) if flows else None)


def _read_history(admin: AdminClient, config: dict[str, Any], flows: list[str], timeout: float) -> History:
    """The evaluations of `flows` among the newest HISTORY_RECORDS of the cluster's `_kdr.health` (where
    health.check.save_evaluation keeps them after each run's samples). A read cut short keeps what arrived."""
    records: list[Message] = []
    try:
        meta = admin.list_topics(timeout=timeout).topics.get(HEALTH)  # asking for it alone would create it
        if meta is None or meta.error is not None:
            return {}, None  # no health run has written here yet
        start = start_offset(admin, HEALTH, 0, timeout)
        end = end_offsets(admin, [(HEALTH, 0)], IsolationLevel.READ_COMMITTED, timeout)[(HEALTH, 0)]
        for message in read_committed(config, {(HEALTH, 0): (max(start, end - HISTORY_RECORDS), end)}, timeout):
            records.append(message)  # one by one: what arrived before a timeout is kept
    except (KafkaException, TimeoutError) as exc:
        return evaluations(records, flows), f"history incomplete: {error_text(exc)}"
    return evaluations(records, flows), None


def evaluations(records: Iterable[Message], flows: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
    """The chart points of `flows` among `_kdr.health` records (in log order, oldest first); unreadable ones skipped."""
    by_key = {evaluation_key(flow): flow for flow in flows}
    points: dict[str, list[dict[str, Any]]] = {flow: [] for flow in by_key.values()}
    for message in records:
        flow = by_key.get(message.key() or b"")
        if flow is None or message.value() is None:
            continue
        try:
            points[flow].append(_point(json.loads(message.value())))
        except (ValueError, KeyError, TypeError):
            log.warning("flow %s: unreadable evaluation in %s skipped", flow, HEALTH)
    return {flow: found[-HISTORY_POINTS:] for flow, found in points.items()}


def _point(evaluation: Mapping[str, Any]) -> dict[str, Any]:
    """One evaluation as a chart point: its status and problems, the flow's total lag in records and its oldest
    uncopied record's age; both None when nothing was measured (a cluster did not answer)."""
    partitions = evaluation["partitions"]
    return {
        "at_ms": int(evaluation["at_ms"]),
        "status": str(evaluation["status"]),
        "problems": [str(problem) for problem in evaluation["problems"]],
        "lag_records": sum(int(p["lag_records"]) for p in partitions) if partitions else None,
        "lag_seconds": max(float(p["lag_seconds"]) for p in partitions) if partitions else None,
        "stalled_seconds": evaluation.get("stalled_seconds"),
    }


def _flow(name: str, source: str, target: str, history: History | None) -> dict[str, Any]:
    """A flow, its history and its latest evaluation: the newer of STATE_DIR/health/<flow>.json (written by every
    health run, even when the target is down) and the last one in the target (which an api-server on another host
    than the workers still reads); None fields when never evaluated."""
    points, history_error = history or ({}, None)
    flow_history = points.get(name, [])
    found = flow_history[-1:]
    error = None
    path = snapshot_path(name)
    if path.exists():
        try:
            found.append(_point(json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            error = f"{path}: unreadable: {exc}"
    latest = max(found, key=lambda point: point["at_ms"], default={})
    return {
        "name": name,
        "source": source,
        "target": target,
        "status": latest.get("status"),
        "problems": latest.get("problems", []),
        "lag_records": latest.get("lag_records"),
        "lag_seconds": latest.get("lag_seconds"),
        "stalled_seconds": latest.get("stalled_seconds"),
        "evaluated_at_ms": latest.get("at_ms"),
        "error": error,
        "history": flow_history,
        "history_error": history_error,
    }


def _clients(topology: Topology) -> tuple[list[dict[str, Any]], str | None]:
    """The client aliases and the cluster each one connects to now."""
    try:
        return [asdict(alias) for alias in client_switch.states(topology)], None
    except (OSError, ValueError, AttributeError) as exc:
        return [], f"client aliases unreadable: {exc}"
