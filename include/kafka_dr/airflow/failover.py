"""Tasks of the dr_failover DAG (the white paper's "When Disaster Strikes").

dr_failover: validate -> (planned: switch producers -> lag 0) -> stop replication from the failed side
-> translate and apply offsets -> schema redirect -> switch consumers -> verify -> report. Every task
returns when it started and ended (`timed`), so the report shows each step's timing and the RTO (run start to
clients switched); the report itself is built by kafka_dr.reports. Validation runs first and changes nothing.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from airflow.sdk import get_current_context, task
from airflow.sdk.exceptions import AirflowFailException
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
from confluent_kafka.admin import AdminClient

from .. import client_switch, reports
from ..clients import ClientConfigError, error_text
from ..replication import activity, replicators
from ..replication.lag import LagError, flow_lag, load_snapshot
from ..schema_registry import RegistryError, redirect
from ..topology import Topology, TopologyError, load_topology
from ..translation.offsets import parse_reset_time
from . import topology_path
from .common import choice_param, groups_param, timed, write_report
from .hooks.kafka_cluster import ClusterUnreachable, KafkaClusterHook
from .hooks.schema_registry import load_registry_credentials

MODES = ("planned", "disaster")


PLANNED_STOP_S = 30.0  # a replicator ends its epoch and commits what it copied
DISASTER_STOP_S = 5.0


def _move_reason(dag_id: str, run_id: str, mode: str, step: str) -> str:
    """How a client move is recorded; the report finds this run's producer moves by it."""
    return f"{dag_id} {run_id} ({mode}, {step})"


@task
@timed
def validate_failover(params: dict[str, Any] | None = None) -> dict[str, Any]:
    """Check every param before anything changes; returns the run's plan."""
    params = params or {}
    try:
        path = topology_path(params.get("topology"))
        topo = load_topology(path)
        failed, target = params.get("failed_cluster"), params.get("target_cluster")
        topo.cluster(str(failed))
        topo.cluster(str(target))
        if failed == target:
            raise ValueError(f"params failed_cluster and target_cluster are both {failed!r}")
        mode = choice_param(params, "mode", MODES)
        groups = groups_param(params)
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
    return {
        "topology": str(path),
        "failed": failed,
        "target": target,
        "mode": mode,
        "groups": groups,
        "reset_to_datetime": reset,
        "flows": flows,
        "stop_flows": stopped,
        "drain": [{"flow": name, "topology": str(path)} for name in flows],
        "translate": [
            {
                "flow": name,
                "topology": str(path),
                "groups": groups,
                "from_checkpoints": mode == "disaster",
                "reset_to_datetime": reset,
            }
            for name in flows
        ],
    }


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
    """planned: producers move first and the lag drains to 0; disaster: straight to stopping replication. The
    branch names its own downstream task (disaster_path), not stop_replication further down: naming a task that is
    not a direct downstream skips both paths, and the scheduler then needs another pass (a second, with dag.test)
    before stop_replication may run."""
    return "switch_producers" if plan["mode"] == "planned" else "disaster_path"


@task
@timed
def switch_producers(plan: dict[str, Any]) -> dict[str, Any]:
    """Planned failover: producers of the failed cluster write to the target from now on."""
    return _switch(plan, roles=("producer",), step="switch_producers")


@task(trigger_rule="none_failed_min_one_success")
@timed
def stop_replication(plan: dict[str, Any]) -> dict[str, Any]:
    """Stop the tracked replicators of every flow from or into the failed cluster. In a disaster they cannot end
    their epoch against a dead cluster: SIGKILL after DISASTER_STOP_S rather than 30 s (their open transactions
    abort, and the writer slots fence whatever survives), which is that much less RTO."""
    timeout = DISASTER_STOP_S if plan["mode"] == "disaster" else PLANNED_STOP_S
    stopped = {}
    for flow in plan["stop_flows"]:
        try:
            final = replicators.stop(flow, timeout=timeout)
        except replicators.ReplicatorError as exc:
            raise AirflowFailException(str(exc)) from None
        stopped[flow] = "not running" if final is None else "stopped"
    return {"replicators": stopped}


@task
@timed
def redirect_schema_registry(plan: dict[str, Any]) -> dict[str, Any]:
    """When the failed cluster held the primary registry, make the target's registry lead on its own store."""
    topo = load_topology(plan["topology"])
    result: dict[str, Any]
    if topo.schema_registry_primary != plan["failed"]:
        result = {
            "skipped": f"the primary registry is {topo.schema_registry_primary or 'not set'}, not on {plan['failed']}"
        }
    elif topo.cluster(plan["target"]).schema_registry is None:
        result = {"skipped": f"cluster {plan['target']} has no schema registry"}
    else:
        load_registry_credentials([plan["target"]])
        try:
            result = redirect(topo, plan["target"], plan["target"], leader_eligible=True).to_dict()
        except RegistryError as exc:
            raise AirflowFailException(str(exc)) from None
    return result


@task
@timed
def switch_consumers(plan: dict[str, Any]) -> dict[str, Any]:
    """Every remaining client of the failed cluster moves to the target: the end of the RTO."""
    return _switch(plan, roles=("producer", "consumer", "both"), step="switch_consumers")


def _switch(plan: dict[str, Any], roles: tuple[str, ...], step: str) -> dict[str, Any]:
    topo = load_topology(plan["topology"])
    context = get_current_context()
    home = plan.get("home")  # a failback moves back only the aliases at home in the restored cluster
    aliases = [
        s.alias
        for s in client_switch.states(topo)
        if s.active == plan["failed"] and s.role in roles and home in (None, s.home)
    ]
    reason = _move_reason(context["dag"].dag_id, context["run_id"], plan["mode"], step)
    moves = client_switch.switch(topo, aliases, plan["target"], reason)
    return {"moved": [m.alias for m in moves]}


@task
@timed
def verify_failover(plan: dict[str, Any], translations: list[dict[str, Any]]) -> dict[str, Any]:
    """Applied groups hold the translated offsets in the target, no client is left on the failed cluster, and no
    flow from or into it still copies: watched in the targets themselves, whatever the tracker says."""
    topo = load_topology(plan["topology"])
    by_target: dict[str, list[str]] = {}
    for name in plan["stop_flows"]:
        by_target.setdefault(topo.flow(name).target, []).append(name)
    # Connections are read here: Airflow's task context is not for other threads.
    configs = {target: KafkaClusterHook(target, topology=topo).client_config() for target in by_target}
    with ThreadPoolExecutor(max_workers=max(1, len(by_target))) as pool:  # the window passes while groups are checked
        watching = {target: pool.submit(activity.watch, configs[target], flows) for target, flows in by_target.items()}
        problems, checked = check_groups_and_clients(topo, plan, translations)
        copying, replication = _still_copying(by_target, watching)
    problems += copying
    if problems:
        raise AirflowFailException("; ".join(problems))
    return {"groups_checked": checked, "replication": replication}


def _still_copying(by_target: dict[str, list[str]], watching: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """A line per stopped flow that still appended progress in its target, and what was seen of each flow;
    a target that does not answer cannot be written to either."""
    problems, seen = [], {}
    for target, future in watching.items():
        try:
            activities = future.result()
        except (KafkaException, TimeoutError, RuntimeError) as exc:
            seen.update(dict.fromkeys(by_target[target], f"{target} unreachable: {error_text(exc)}"))
            continue
        for flow, act in activities.items():
            seen[flow] = "still copying" if act.records else f"no progress in {activity.WINDOW_S:g}s"
            if act.records:
                problems.append(
                    f"flow {flow} still copies into {target}: {act.records} progress records in "
                    f"{activity.WINDOW_S:g}s (last {act.last_key}); a replicator of it still runs"
                )
    return problems, seen


def check_groups_and_clients(
    topo: Topology, plan: dict[str, Any], translations: list[dict[str, Any]]
) -> tuple[list[str], int]:
    """Problems with the applied group offsets or the client aliases (those at home in plan["home"], when given),
    and how many groups were checked; dr_failback's verify uses it too."""
    admin = AdminClient(KafkaClusterHook(plan["target"], topology=topo).client_config())
    problems, checked = [], 0
    for summary in translations:
        # Every group's request in flight at once: a thousand groups cost about one round trip, not a thousand.
        reading = {
            group: admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=30)[group]
            for group in summary.get("applied", [])
        }
        for group, future in reading.items():
            expected = {(t["dest_topic"], t["partition"]): t["dest_offset"] for t in summary["groups"][group]}
            result = future.result(30)
            actual = {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions or [] if tp.offset >= 0}
            # At or past the translated offset: an application that moved with its alias has read on since.
            if any(actual.get(key, -1) < offset for key, offset in expected.items()):
                problems.append(
                    f"group {group}: committed {actual} in {plan['target']}, behind the translated {expected}"
                )
            checked += 1
    home = plan.get("home")
    left = [s.alias for s in client_switch.states(topo) if s.active == plan["failed"] and home in (None, s.home)]
    if left:
        problems.append(f"clients still on {plan['failed']}: {', '.join(left)}")
    return problems, checked


def _lag_readings(topo: Topology, flows: list[str]) -> dict[str, reports.LagReading]:
    """Each flow's lag for the RPO: measured now when the source answers (exact), else the last lag snapshot kept
    in the target (an estimate as of its time)."""
    readings = {}
    for name in flows:
        try:
            readings[name] = reports.LagReading(flow_lag(topo, name, timeout=5.0), exact=True)
        except LagError:
            target = KafkaClusterHook(topo.flow(name).target, topology=topo).client_config()
            readings[name] = reports.LagReading(load_snapshot(target, name), exact=False)
    return readings


@task(trigger_rule="none_failed_min_one_success")
def failover_report(plan: dict[str, Any], results: dict[str, Any]) -> dict[str, Any]:
    """RPO, RTO, groups translated and skipped, registry state and every step's timing, as JSON and as a
    readable page in STATE_DIR/reports/: gathered here, built by kafka_dr.reports."""
    context = get_current_context()
    dag_id, run_id = context["dag"].dag_id, context["run_id"]
    producer_moves = _move_reason(dag_id, run_id, "planned", "switch_producers")
    body = reports.failover_report(
        plan,
        results,
        _lag_readings(load_topology(plan["topology"]), plan["flows"]),
        dag_id=dag_id,
        run_id=run_id,
        run_started=context["dag_run"].start_date,
        producers_first=[m.alias for m in client_switch.history() if m.reason == producer_moves],
    )
    return write_report(dag_id, run_id, body, reports.failover_page(body))
