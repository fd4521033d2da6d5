"""kafka-dr's Prometheus metrics, in the text exposition format, served from what health runs and DR runs left on disk:
each flow's latest evaluation (STATE_DIR/health/<flow>.json, health.check.save_evaluation), the newest report of
each DR DAG, the drills' evidence (STATE_DIR/drills/) and the newest readiness check (STATE_DIR/readiness.json). A
scrape makes no Kafka round trip: a Prometheus that scrapes every 15 s must not load the clusters, and a cluster that
is down must not slow the scrape. The values are those of the last health run; their age is
`kafka_dr_health_last_run_timestamp_seconds`. No Airflow import: the api-server's route (dashboard.app) and
`kafka-dr metrics` use it alike.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from . import readiness, roles
from .alerts import delivery_counts
from .drill.history import drill_history
from .health.proposal import cluster_reachability
from .health.snapshots import load_snapshots
from .paths import default_topology
from .processes import write_atomic
from .reports import latest_reports
from .roles import FailedOver
from .times import epoch_ms
from .topology import Topology, TopologyError, load_topology

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
TOKEN_ENV = "KDR_METRICS_TOKEN"
TOKEN_FILE_ENV = "KDR_METRICS_TOKEN_FILE"
STATUS_VALUES = {"OK": 0, "WARN": 1, "ERR": 2}
RTO_DAGS = ("dr_failover", "dr_failback")


def scrape_token() -> str | None:
    """The bearer token a scraper must send: $KDR_METRICS_TOKEN, else the contents of the file that
    $KDR_METRICS_TOKEN_FILE names (a container secret, which Prometheus reads from the same file); None: metrics off.
    A named file that cannot be read raises OSError: a deployment that meant to turn metrics on must not silently
    serve them off."""
    if token := os.environ.get(TOKEN_ENV, "").strip():
        return token
    if path := os.environ.get(TOKEN_FILE_ENV):
        return Path(path).read_text(encoding="utf-8").strip() or None
    return None


def render(topology_path: str | Path | None = None) -> bytes:
    """The metrics now, as Prometheus's text format. `topology_path` None: $KDR_TOPOLOGY, else the default file."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DrCollector(default_topology() if topology_path is None else Path(topology_path)))
    return generate_latest(registry)


def write_textfile(path: Path, topology_path: str | Path | None = None) -> int:
    """The metrics written for node_exporter's textfile collector, atomically (processes.write_atomic: a `.tmp`
    beside `path`, which the collector's `*.prom` never matches, renamed over it), so the collector never reads half
    a file. Returns the bytes written."""
    body = render(topology_path)
    write_atomic(path, body.decode())
    return len(body)


class DrCollector(Collector):
    """Collects on every scrape from the state directory; the topology names the flows and clusters, and its
    `health:` SLOs are exported so that alerting rules compare against the same limits as health runs."""

    def __init__(self, topology_path: Path) -> None:
        self.topology_path = topology_path

    def collect(self) -> Iterator[Metric]:
        try:
            topology: Topology | None = load_topology(self.topology_path)
        except TopologyError as exc:
            log.warning("metrics: %s", exc)
            topology = None
        yield _gauge("kafka_dr_topology_valid", "1 when the topology file loads, else 0", [([], topology is not None)])
        snapshots = load_snapshots(None if topology is None else [f.name for f in topology.flows])
        yield from flow_metrics(snapshots, time.time())
        if topology is not None:
            yield from topology_metrics(topology, snapshots)
            yield from failover_metrics(topology, roles.pending())
        yield from report_metrics(latest_reports())
        yield from drill_metrics(drill_history())
        yield from readiness_metrics(readiness.load())
        deliveries = CounterMetricFamily(
            "kafka_dr_alert_deliveries",
            "Alerts sent, per target (alerts.urls[i]) and result",
            labels=["target", "result"],
        )
        for (target, result), count in sorted(delivery_counts().items()):
            deliveries.add_metric([target, result], count)
        yield deliveries


def flow_metrics(snapshots: Mapping[str, Mapping[str, Any]], now: float) -> Iterator[Metric]:
    """Per flow and partition, from the latest evaluations."""
    status, lag_records, lag_seconds, latency, checkpoint_age, up, stalled = [], [], [], [], [], [], []
    for flow, snapshot in sorted(snapshots.items()):
        status.append(([flow], STATUS_VALUES.get(snapshot["status"], 2)))
        stalled.append(([flow], snapshot.get("stalled_seconds") or 0))
        for p in snapshot.get("partitions", []):
            labels = [flow, p["topic"], str(p["partition"])]
            lag_records.append((labels, p["lag_records"]))
            lag_seconds.append((labels, p["lag_seconds"]))
        findings = snapshot.get("findings") or {}
        if findings.get("heartbeat_latency_ms") is not None:
            latency.append(([flow], findings["heartbeat_latency_ms"] / 1000))
        if findings.get("checkpoint_ms") is not None:
            checkpoint_age.append(([flow], max(0.0, now - findings["checkpoint_ms"] / 1000)))
        if findings.get("replicator_alive") is not None:
            up.append(([flow], findings["replicator_alive"]))
    yield _gauge("kafka_dr_flow_status", "Status at the last health run: 0 OK, 1 WARN, 2 ERR", status, ["flow"])
    partition = ["flow", "topic", "partition"]
    yield _gauge("kafka_dr_partition_lag_records", "Records not yet copied", lag_records, partition)
    yield _gauge("kafka_dr_partition_lag_seconds", "Age of the oldest record not yet copied", lag_seconds, partition)
    yield _gauge("kafka_dr_heartbeat_latency_seconds", "From a heartbeat's creation to its copy", latency, ["flow"])
    yield _gauge(
        "kafka_dr_checkpoint_age_seconds", "Age of the newest group-offset checkpoint", checkpoint_age, ["flow"]
    )
    yield _gauge("kafka_dr_replicator_up", "1 when the flow's replicator runs, if one should", up, ["flow"])
    yield _gauge(
        "kafka_dr_replicator_stalled_seconds",
        "How long the flow's replicator has run without copying records that wait (0: not stalled)",
        stalled,
        ["flow"],
    )
    last = max((s["at_ms"] / 1000 for s in snapshots.values() if isinstance(s.get("at_ms"), int)), default=None)
    yield _gauge(
        "kafka_dr_health_last_run_timestamp_seconds",
        "When the newest health evaluation was made (Unix time)",
        [] if last is None else [([], last)],
    )


def topology_metrics(topology: Topology, snapshots: Mapping[str, Mapping[str, Any]]) -> Iterator[Metric]:
    """Each cluster's reachability as the latest health runs saw it, and the topology's SLOs."""
    unreachable = {flow: (s.get("findings") or {}).get("unreachable_cluster") for flow, s in snapshots.items()}
    reachable = [([cluster], up) for cluster, up in cluster_reachability(topology, unreachable).items()]
    yield _gauge(
        "kafka_dr_cluster_reachable", "1 when the latest health runs reached the cluster", reachable, ["cluster"]
    )
    slo = topology.health
    limits = {
        "kafka_dr_slo_max_lag_records": slo.max_lag_records,
        "kafka_dr_slo_max_lag_seconds": slo.max_lag_seconds,
        "kafka_dr_slo_max_checkpoint_age_seconds": slo.max_checkpoint_age_s,
    }
    for name, value in limits.items():
        yield _gauge(name, "The topology's health: limit", [] if value is None else [([], value)])


def report_metrics(reports: Mapping[str, Mapping[str, Any] | None]) -> Iterator[Metric]:
    """RPO and RTO of the newest failover and failback reports (a report that does not parse is left out)."""
    rpo, rto = [], []
    for dag in RTO_DAGS:
        report = reports.get(dag)
        if report is None or report.get("error"):
            continue
        if report.get("rpo_records") is not None:
            rpo.append(([dag], report["rpo_records"]))
        if report.get("rto_seconds") is not None:
            rto.append(([dag], report["rto_seconds"]))
    yield _gauge("kafka_dr_last_rpo_records", "Records lost, as the newest run counted them", rpo, ["dag"])
    yield _gauge("kafka_dr_last_rto_seconds", "Seconds to switch the clients in the newest run", rto, ["dag"])


def drill_metrics(drills: Sequence[Mapping[str, Any]]) -> Iterator[Metric]:
    """The newest drill with a verdict of each scenario (drill_history's order, oldest first): whether it passed, its
    RTO and when it ended. A drill still running, or stopped before its verdict, leaves the one before it standing;
    unreadable evidence is left out."""
    newest = {str(d["scenario"]): d for d in drills if d["error"] is None and d["scenario"] and d["passed"] is not None}
    success, rto, ended = [], [], []
    for scenario, drill in sorted(newest.items()):
        success.append(([scenario], drill["passed"]))
        if drill["rto_seconds"] is not None:
            rto.append(([scenario], drill["rto_seconds"]))
        if drill["ended"] is not None:
            ended.append(([scenario], epoch_ms(drill["ended"], "ended") / 1000))
    labels = ["scenario"]
    yield _gauge(
        "kafka_dr_drill_last_success", "1 when the newest drill of the scenario passed, else 0", success, labels
    )
    yield _gauge("kafka_dr_drill_last_rto_seconds", "Seconds to switch the clients in the newest drill", rto, labels)
    yield _gauge("kafka_dr_drill_last_timestamp_seconds", "When the newest drill ended (Unix time)", ended, labels)


def failover_metrics(topology: Topology, pending: Mapping[str, FailedOver]) -> Iterator[Metric]:
    """Each failover whose failback is pending (kafka_dr.roles), and the flows it holds: the alerting rules leave
    those flows and that cluster to KafkaDrFailedOver instead of paging about each."""
    away = [([f.away, f.serving], 1) for f in pending.values()]
    since = [([f.away], epoch_ms(f.switched_at, "switched_at") / 1000) for f in pending.values()]
    held = [([flow], 1) for flow in sorted(roles.away_flows(topology, pending))]
    yield _gauge("kafka_dr_failed_over", "1 while the cluster's failback is pending", away, ["cluster", "serving"])
    yield _gauge(
        "kafka_dr_failed_over_timestamp_seconds",
        "When the cluster's clients were moved (Unix time)",
        since,
        ["cluster"],
    )
    yield _gauge("kafka_dr_flow_failed_over", "1 for a flow from or into a cluster failed over from", held, ["flow"])


def readiness_metrics(saved: Mapping[str, Any] | None) -> Iterator[Metric]:
    """The newest health run's readiness: each check gathered there, 1 ready or 0 not (a check that could not be
    gathered is left out), and when it was checked."""
    findings = [] if saved is None else [f for f in saved["findings"] if f["ready"] is not None]
    ready = [([f["check"]], f["ready"]) for f in findings]
    yield _gauge(
        "kafka_dr_readiness", "1 when nothing this check looks at would stop or slow a failover", ready, ["check"]
    )
    checked = [] if saved is None else [([], epoch_ms(saved["checked_at"], "checked_at") / 1000)]
    yield _gauge("kafka_dr_readiness_timestamp_seconds", "When readiness was last checked (Unix time)", checked)


def _gauge(
    name: str, documentation: str, samples: list[tuple[list[str], float | bool]], labels: list[str] | None = None
) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation, labels=labels or [])
    for values, value in samples:
        family.add_metric(values, float(value))
    return family
