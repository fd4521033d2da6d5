"""One health check of a flow, as `dr_replication_health` and `kafka-dr health` run it: sample the flow (with its
earlier samples from the target's `_kdr.health`), evaluate the window, and keep the new samples and the
evaluation in the target (the evaluation also as a JSON file under the state dir), where the next run, the
failover report and the dashboard read them.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException, Producer

from ..access import ClusterAccess
from ..clients import error_text
from ..replication.internal import HEALTH, internal_writer, newest_value, put_many
from ..state import write_json
from .rules import FlowFindings, FlowHealth, evaluate_flow
from .sampler import evaluation_key, sample_records, take_sample
from .snapshots import snapshot_path

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Checked:
    """One flow's check as dr_replication_health's tasks hand it on: its evaluation, and the cluster the check could
    not reach (None when both answered), which the outage count reads."""

    health: FlowHealth
    unreachable_cluster: str | None = None


def check_flow(access: ClusterAccess, flow_name: str) -> FlowHealth:
    """Sample, evaluate and keep the health of one flow; never raises for a cluster that is down (the flow is
    ERR, saying which cluster)."""
    return check_flow_findings(access, flow_name)[0]


def check_flow_findings(access: ClusterAccess, flow_name: str) -> tuple[FlowHealth, FlowFindings]:
    """check_flow, with the sample's findings beside the evaluation (which cluster could not be reached, ...)."""
    flow = access.topology.flow(flow_name)
    target_config = access.config(flow.target)
    writer = internal_writer(target_config)  # made first: it connects while the flow is sampled
    sample = take_sample(access, flow.name)
    windows = {key: list(history) for key, history in sample.history.items()}
    for current in sample.partitions:
        windows.setdefault((current.topic, current.partition), []).append(current)
    health = evaluate_flow(flow.name, windows, sample.findings, access.topology.health, sample.findings.time_ms)
    save_evaluation(
        None if sample.findings.unreachable else target_config,
        health,
        sample.findings.time_ms,
        sample_records(flow.name, sample.partitions),
        writer,
        sample.findings,
    )
    return health, sample.findings


def save_evaluation(
    target_config: dict[str, Any] | None,
    health: FlowHealth,
    at_ms: int,
    samples: list[tuple[str, bytes, Any]],
    writer: Producer | None = None,
    findings: FlowFindings | None = None,
) -> None:
    """The run's samples (the next runs' windows) and the flow's evaluation in its target's `_kdr.health`, in one
    write, where they survive the Airflow host and the source. The evaluation also goes to
    STATE_DIR/health/<flow>.json, even when the target does not answer (`target_config` None), with the run's
    `findings` beside it (what the metrics export). `writer`: a producer made earlier
    (replication.internal.internal_writer), else a new one."""
    snapshot = {**health.to_dict(), "at_ms": at_ms}
    path = snapshot_path(health.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {**snapshot, "findings": findings and findings.to_dict()})
    if target_config is not None:
        try:
            put_many(target_config, [*samples, (HEALTH, evaluation_key(health.name), snapshot)], writer=writer)
        except KafkaException as exc:
            log.warning("flow %s: samples and evaluation not kept in the target: %s", health.name, error_text(exc))


def load_evaluation(target_config: dict[str, Any], flow: str) -> dict[str, Any] | None:
    """The flow's latest evaluation as kept in its target (None: never evaluated)."""
    value = newest_value(target_config, HEALTH, evaluation_key(flow))
    return None if value is None else json.loads(value)
