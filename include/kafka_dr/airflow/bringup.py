"""Tasks of the dr_bringup DAG; each fails with one line saying what is wrong and where.

Every task takes the plan that `validate_topology` returns: the kwargs of the per-flow mapped operators
(ReplicationOperator, ReplicationLagSensor), one {"flow", "topology"} entry per selected flow, which `_plan` reads
back as the BringupPlan they stand for, so a run works from the inputs checked at its start. The checks themselves
are kafka_dr.bringup (no Airflow there); these tasks add the Airflow connections' client settings and registry
credentials. The report takes each step's result as an argument the DAG wires, under the report's field name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import get_current_context, task
from airflow.sdk.exceptions import AirflowFailException

from ..bringup import checks
from ..bringup.plan import BringupPlan
from ..clients import ClientConfigError
from ..runbooks import see_runbook
from ..state import now_iso
from ..topology import TopologyError
from .common import flow_clusters, flow_kwargs, selected_flows, typed, write_report
from .hooks.kafka_cluster import ClusterUnreachable, KafkaClusterHook, cluster_access


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
            raise ValueError(
                "params max_lag_records and max_lag_seconds: give at least one; "
                + see_runbook("dr_bringup", "a-param-is-refused")
            )
    except (TopologyError, ClientConfigError, ValueError) as exc:
        raise AirflowFailException(str(exc)) from None
    return flow_kwargs(str(path), [flow.name for flow in selected])


def _plan(kwargs: Sequence[Mapping[str, str]]) -> BringupPlan:
    """The plan `validate_topology`'s kwargs stand for; ValueError when they are empty, an entry is not a flow and
    its topology, or they name several topologies."""
    if not kwargs:
        raise ValueError("bring-up plan: no flow")
    odd = next((entry for entry in kwargs if set(entry) != {"flow", "topology"}), None)
    if odd is not None:
        raise ValueError(f"bring-up plan: an entry is not a flow and its topology: {dict(odd)}")
    topologies = {entry["topology"] for entry in kwargs}
    if len(topologies) > 1:
        raise ValueError(f"bring-up plan: flows of several topologies: {', '.join(sorted(topologies))}")
    return BringupPlan(kwargs[0]["topology"], tuple(entry["flow"] for entry in kwargs))


@task
def clusters_reachable(plan: list[dict[str, str]], timeout: float = 10.0) -> dict[str, str]:
    """Every cluster answers, and no two topology entries are the same Kafka cluster (a copy onto itself)."""
    topo, flows = _plan(plan).load()
    ids, problems = {}, []
    for cluster in flow_clusters(flows):
        try:
            ids[cluster] = KafkaClusterHook(cluster, topology=topo).check_reachable(timeout)
        except ClusterUnreachable as exc:
            problems.append(str(exc))
    problems += checks.same_clusters(ids)
    if problems:
        raise AirflowFailException("; ".join(problems))
    return ids


@task
def internal_topics(plan: list[dict[str, str]]) -> dict[str, list[str]]:
    """The `_kdr.` topics exist on every cluster of the run; returns the ones created now."""
    topo, flows = _plan(plan).load()
    try:
        return checks.create_internal_topics(flow_clusters(flows), cluster_access(topo))
    except checks.BringupError as exc:
        raise AirflowFailException(str(exc)) from None


@task
def destination_topics_synced(plan: list[dict[str, str]]) -> dict[str, dict[str, Any]]:
    """Each flow's destination topics exist with the source's partitions and topic configs."""
    topo, flows = _plan(plan).load()
    try:
        return checks.sync_destination_topics(flows, cluster_access(topo))
    except checks.BringupError as exc:  # a refusal asks to add partitions or change the rename
        raise AirflowFailException(
            f"{exc}; {see_runbook('dr_bringup', 'a-destination-topic-cannot-be-synced')}"
        ) from None


@task
def schema_registries_checked(plan: list[dict[str, str]]) -> dict[str, dict[str, Any]]:
    """Every registry of the run's clusters answers GET /subjects, and those that report their leader agree on
    one: the primary's registry when the topology names one."""
    topo, flows = _plan(plan).load()
    urls = checks.registry_urls(topo, flow_clusters(flows))
    try:
        return checks.check_registries(cluster_access(topo), urls)
    except checks.BringupError as exc:
        raise AirflowFailException(str(exc)) from None


@task
def heartbeat_round_trip(plan: list[dict[str, str]], timeout: float = 60.0) -> dict[str, float]:
    """A heartbeat produced into each flow's source arrives in its target; returns end-to-end seconds."""
    topo, flows = _plan(plan).load()
    try:
        return checks.heartbeat_round_trips(flows, cluster_access(topo), timeout)
    except checks.BringupError as exc:  # "is the replicator running?": the operator looks
        raise AirflowFailException(f"{exc}; {see_runbook('dr_bringup', 'no-heartbeat-came-through')}") from None


@task
@typed
def report(
    plan: list[dict[str, str]],
    cluster_ids: dict[str, str],
    internal_topics_created: dict[str, list[str]],
    topic_sync: dict[str, dict[str, Any]],
    schema_registries: dict[str, dict[str, Any]],
    replicators: list[dict[str, Any]],
    lag: list[dict[str, Any] | None],
    heartbeat_latency_s: dict[str, float],
) -> dict[str, Any]:
    """Write what the run did and measured to STATE_DIR/reports/<dag>-<run>.json, each step's result under its
    argument's name, and return it. `replicators` and `lag` are the mapped operators' results, one per flow."""
    context = get_current_context()
    dag_id, run_id = context["dag"].dag_id, context["run_id"]
    checked = _plan(plan)
    body = {
        "dag_id": dag_id,
        "run_id": run_id,
        "finished_at": now_iso(),
        "params": dict(context["params"]),
        "plan": flow_kwargs(checked.topology, checked.flows),
        "cluster_ids": cluster_ids,
        "internal_topics_created": internal_topics_created,
        "topic_sync": topic_sync,
        "schema_registries": schema_registries,
        "replicators": replicators,
        "lag": lag,
        "heartbeat_latency_s": heartbeat_latency_s,
    }
    return write_report(dag_id, run_id, body)
