"""`kafka-dr-dev demo` (`make demo`): the disaster drill on the embedded stack and the real Airflow, through dr_drill.

local stack and Airflow up -> the known starting state -> dr_bringup -> dr_drill (disaster_round_trip): its probe
application, dc1 cut off, dr_failover, dc1 back, dr_failback, every check -> a table of what the probe counted, the
RPO and RTO of both switches, the drill's verdict and each run's scheduler delay. One code path: the demo triggers the
drill an operator or the schedule triggers, through Airflow's REST API, and approves its failover and failback as the
`approver` user, as an on-call engineer's script would. Airflow and the stack keep running afterwards, to look at it
all in the UI.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_dr import client_switch
from kafka_dr.client_switch import Move
from kafka_dr.drill.evidence import evidence_path
from kafka_dr.drill.plan import INNER_RUNS, inner_run_id
from kafka_dr.paths import default_topology
from kafka_dr.state import report_path
from kafka_dr.times import epoch_ms
from kafka_dr.topology import Topology, load_topology

from .airflow_rest import POLL_S, AirflowRest
from .local.airflow import APPROVER, APPROVER_PASSWORD, PASSWORD, USER, LocalAirflow
from .local.stack import LocalStack

RUN_TIMEOUT = 900.0  # seconds a DAG run may take before the demo gives up on it
FAILED, SERVING = "dc1", "dc2"
DRILL = {"scenario": "disaster_round_trip", "from_cluster": FAILED, "to_cluster": SERVING, "approval": "as_topology"}


@dataclass(frozen=True)
class Step:
    dag_id: str
    run_id: str
    state: str
    seconds: float  # trigger to end, as the demo saw it (a drill's inner runs: start to end)
    scheduler_delay: float | None  # run queued -> its first task started: what is Airflow's, not kafka-dr's
    report: dict[str, Any] | None


def run_demo(data_dir: str | Path, out: Callable[[str], None] = print) -> bool:
    """Run the drill; True when dr_bringup and the drill succeeded (the drill passes only when every probe record was
    delivered once, the objectives held, the flows are healthy and everything is back as it was)."""
    started = time.monotonic()
    topology_file = default_topology()
    topology = load_topology(topology_file)
    stack = LocalStack(data_dir)
    out(f"[{_clock(started)}] local stack: {', '.join(stack.up()) or 'already running'} ({stack.data_dir})")
    local_airflow = LocalAirflow()
    out(f"[{_clock(started)}] Airflow: starting in {local_airflow.home} ...")
    out(f"[{_clock(started)}] Airflow: {', '.join(local_airflow.up(topology, topology_file)) or 'already running'}")
    api = AirflowRest(local_airflow.url, USER, PASSWORD)
    approver = AirflowRest(local_airflow.url, APPROVER, APPROVER_PASSWORD)  # the second pair of eyes

    def run(dag_id: str, conf: dict[str, Any]) -> Step:
        out(f"[{_clock(started)}] trigger {dag_id} {json.dumps(conf)}")
        step = trigger_and_wait(api, dag_id, conf, lambda line: out(f"[{_clock(started)}]   {line}"), approver)
        out(f"[{_clock(started)}] {dag_id}: {step.state} in {step.seconds:.0f} s")
        return step

    for line in known_state(topology, stack):
        out(f"[{_clock(started)}] known state: {line}")
    steps: list[Step] = [run("dr_bringup", {})]
    if steps[-1].state != "success":
        out(f"[{_clock(started)}] stopped: dr_bringup {steps[-1].state} (run {steps[-1].run_id}): nothing to drill")
        return False
    steps.append(run("dr_drill", DRILL))
    evidence_file = evidence_path(steps[-1].run_id, ".json")
    if not evidence_file.exists():
        out(f"[{_clock(started)}] stopped: dr_drill {steps[-1].state} (run {steps[-1].run_id}) wrote no evidence")
        return False
    evidence = json.loads(evidence_file.read_text())
    steps += [inner_step(api, run["dag_id"], run["run_id"]) for run in evidence.get("runs", [])]
    out("")
    out(summary(evidence, steps))
    out("")
    out(f"Airflow UI: {local_airflow.url} (user {USER}, password {PASSWORD})")
    out(f"Kafka DR page: {local_airflow.url}/kafka-dr/")
    out(f"The drill's evidence: {evidence_path(steps[1].run_id, '.html')} (and .json, .pdf beside it)")
    out(
        "Airflow, the replicators and the stack keep running: stop them with `kafka-dr-dev airflow down`, "
        "`kafka-dr replicators stop` and `kafka-dr-dev local down`."
    )
    return all(s.state == "success" for s in steps)


def known_state(topology: Topology, stack: LocalStack) -> list[str]:
    """Put the stack where the drill starts, saying what was changed: every client alias on its home cluster, the
    primary's registry leading on its own store and every other registry following it (an earlier drill or a
    failover from the UI may have left them otherwise). Followers are demoted before the primary is promoted:
    never two leaders."""
    done = [f"{m.alias} moved back to {m.to_cluster}" for m in _aliases_home(topology)]
    primary = topology.schema_registry_primary
    if primary is None:
        return done
    store = stack.config.dc(primary).broker_address
    wanted = {dc.name: (store, dc.name == primary) for dc in stack.config.dcs}
    for name in sorted(wanted, key=lambda n: n == primary):  # the followers first
        dc = stack.config.dc(name)
        if (dc.registry_kafkastore, dc.registry_leader_eligible) != wanted[name]:
            stack.restart_registry(name, *wanted[name])
            role = "leads on its own store" if wanted[name][1] else f"follows {primary}'s store"
            done.append(f"the {name} registry restarted: it {role}")
    return done


def _aliases_home(topology: Topology) -> list[Move]:
    moves: list[Move] = []
    for state in client_switch.states(topology):
        if state.active != state.home:
            moves += client_switch.switch(topology, [state.alias], state.home, "kafka-dr-dev demo: the drill's start")
    return moves


def trigger_and_wait(
    api: AirflowRest,
    dag_id: str,
    conf: dict[str, Any],
    progress: Callable[[str], None],
    approver: AirflowRest | None = None,
    poll_s: float = POLL_S,
) -> Step:
    """One DAG run through the REST API, followed to its end, with its report when it wrote one. With `approver`, a
    task that awaits a person's input (the `approve` of a failover) is approved as that user, as an on-call
    engineer's script would."""
    begun = time.monotonic()
    run_id = api.trigger(dag_id, conf)["dag_run_id"]
    related = [(d, inner_run_id(run_id, step)) for step, d in INNER_RUNS.items()]

    def approve(awaiting_dag: str, awaiting_run: str, task_id: str) -> None:
        if approver is not None:
            answer = approver.answer(awaiting_dag, awaiting_run, task_id, "Approve")
            progress(f"{awaiting_dag}: {task_id} approved by {(answer.get('responded_by') or {}).get('name')}")

    ended = api.wait(dag_id, run_id, RUN_TIMEOUT, progress, approve, related if dag_id == "dr_drill" else (), poll_s)
    step = inner_step(api, dag_id, run_id, ended)
    return Step(dag_id, run_id, step.state, time.monotonic() - begun, step.scheduler_delay, step.report)


def inner_step(api: AirflowRest, dag_id: str, run_id: str, run: dict[str, Any] | None = None) -> Step:
    """A run as the demo's table shows it: state, start to end, scheduler delay, its report."""
    run = run or api.dag_run(dag_id, run_id)
    starts = [ti["start_date"] for ti in api.task_instances(dag_id, run_id) if ti.get("start_date")]
    delay = None
    if starts and run.get("queued_at"):
        delay = (epoch_ms(min(starts), "task start") - epoch_ms(run["queued_at"], "run queued")) / 1000
    seconds = 0.0
    if run.get("start_date") and run.get("end_date"):
        seconds = (epoch_ms(run["end_date"], "run end") - epoch_ms(run["start_date"], "run start")) / 1000
    path = report_path(dag_id, run_id)
    report = json.loads(path.read_text()) if path.exists() else None
    return Step(dag_id, run_id, run["state"], seconds, delay, report)


def summary(evidence: dict[str, Any], steps: list[Step]) -> str:
    """The drill's table: the probe's counts, each switch's figures, the verdict, then each DAG run's time."""
    probe = evidence.get("probe") or {}
    failover = next((s for s in steps if s.dag_id == "dr_failover"), None)
    failback = next((s for s in steps if s.dag_id == "dr_failback"), None)
    goals = evidence.get("objectives") or {}
    rows = [
        ("records sent by the probe's producer", _value(probe, "sent")),
        ("  acknowledged by a cluster", _value(probe, "produced")),
        ("  refused (an error no retry mends)", _value(probe, "refused")),
        ("  never acknowledged (left at the end)", _value(probe, "unacknowledged")),
        ("consumer behind when dc1 was lost", _value(probe, "behind_at_cut")),
        ("  acknowledged by dc1, not found in dc2", _value(probe, "unread_after_failover")),
        ("records delivered (distinct)", _value(probe, "delivered")),
        ("records lost (acknowledged, never delivered)", _value(probe, "lost")),
        ("records read twice from Kafka", _value(probe, "read_twice")),
        ("  delivered twice (after de-duplication)", _value(probe, "duplicated")),
        ("failover RPO (records not replicated)", _report(failover, "rpo", "records")),
        ("failover RTO (s; the approval's wait left out)", _report(failover, "rto_seconds")),
        ("  triggered by, approved by", f"{_report(failover, 'triggered_by')}, {_report(failover, 'approved_by')}"),
        ("  approval waited (s)", _report(failover, "approval_wait_seconds")),
        ("failback unreplicated, republished", _report(failback, "unreplicated", "records")),
        ("failback RTO (s; the approval's wait left out)", _report(failback, "rto_seconds")),
        ("  triggered by, approved by", f"{_report(failback, 'triggered_by')}, {_report(failback, 'approved_by')}"),
        ("  approval waited (s)", _report(failback, "approval_wait_seconds")),
        ("drill RPO, objective", f"{_value(evidence.get('rpo') or {}, 'records')}, {_objective(goals, 'rpo_records')}"),
        ("drill RTO (s), objective", f"{_value(evidence, 'rto_seconds')}, {_objective(goals, 'rto_seconds')}"),
        ("drill", "PASSED" if evidence.get("passed") else f"FAILED: {evidence.get('failure')}"),
    ]
    width = max(len(name) for name, _ in rows)
    lines = [f"{name.ljust(width)}  {value}" for name, value in rows]
    lines += ["", f"{'DAG run'.ljust(22)} {'state':8} {'seconds':>8} {'scheduler delay (s)':>20}"]
    for s in steps:
        delay = "-" if s.scheduler_delay is None else f"{s.scheduler_delay:.1f}"
        lines.append(f"{s.dag_id.ljust(22)} {s.state:8} {s.seconds:8.0f} {delay:>20}")
    return "\n".join(lines)


def _value(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    return "-" if value is None else f"{value:.1f}" if isinstance(value, float) else str(value)


def _objective(goals: dict[str, Any], key: str) -> str:
    goal = goals.get(key) or {}
    if goal.get("objective") is None:
        return "no objective"
    return f"{goal['objective']:g} ({'met' if goal.get('passed') else 'missed'})"


def ensure_topic(config: dict[str, Any], topic: str, partitions: int) -> None:
    admin = AdminClient(config)  # kept referenced until its future resolves
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def _report(step: Step | None, *keys: str) -> str:
    value: Any = step.report if step is not None else None
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    if isinstance(value, float):
        return f"{value:.1f}"
    return "-" if value is None else str(value)


def _clock(started: float) -> str:
    seconds = int(time.monotonic() - started)
    return f"{seconds // 60:02d}:{seconds % 60:02d}"
