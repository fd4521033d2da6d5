"""`kafka-dr demo` (`make demo`): the DR drill on the embedded stack and the real Airflow, step by step.

local stack and Airflow up -> dr_bringup -> an application producing and consuming Avro -> health OK -> dc1 lost
(its broker and registry killed) -> dr_failover (disaster) -> the application goes on in dc2 -> dc1 back ->
dr_failback (republishing what never left dc1) -> health OK -> a table of what the application's consumer counted,
the RPO and RTO of both switches, and the scheduler's own delay. Every DAG is triggered through Airflow's REST API,
as an operator's script would. Airflow and the stack keep running afterwards, to look at it all in the UI.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from .. import client_switch
from ..airflow_rest import AirflowRest
from ..client_switch import Move
from ..clients import client_config
from ..local.airflow import APPROVER, APPROVER_PASSWORD, PASSWORD, USER, LocalAirflow
from ..local.stack import LocalStack
from ..paths import default_topology
from ..state import report_path, subdir
from ..times import epoch_ms
from ..topology import Topology, load_topology
from ..translation.checkpoints import load_checkpoints
from .app import GROUP, TOPIC, DemoApplication

RUN_TIMEOUT = 900.0  # seconds a DAG run may take before the demo gives up on it
HOLD_S = 8.0  # the consumer stops reading this long before the disaster: it is behind when dc1 is lost
HEALTH_TRIES = 6  # a fresh flow may lack its first checkpoint for a minute: health is asked again
FAILED, SERVING = "dc1", "dc2"


@dataclass(frozen=True)
class Step:
    dag_id: str
    run_id: str
    state: str
    seconds: float  # trigger to end, as the demo saw it
    scheduler_delay: float | None  # run queued -> its first task started: what is Airflow's, not kafka-dr's
    report: dict[str, Any] | None


def run_demo(data_dir: str | Path, out: Callable[[str], None] = print) -> bool:
    """Run the drill; True when every step succeeded and the consumer counted no record lost or delivered twice."""
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
        out(f"[{_clock(started)}] {dag_id}: {step.state} in {step.seconds:.0f} s ({app_counts()})")
        return step

    app = DemoApplication(
        topology, log=lambda line: out(f"[{_clock(started)}] {line}"), client_log=_client_log(subdir("demo"))
    )

    def app_counts() -> str:
        tally = app.tally
        return f"application: {len(tally.acknowledged)} produced, {len(tally.consumed)} consumed"

    for line in known_state(topology, stack):
        out(f"[{_clock(started)}] known state: {line}")
    for dc in (FAILED, SERVING):  # the application's topic, in both DCs (topic1 flows both ways)
        ensure_topic(client_config(topology.cluster(dc)), TOPIC, 3)
    steps: list[Step] = [run("dr_bringup", {})]
    if steps[-1].state != "success":
        out(f"[{_clock(started)}] stopped: dr_bringup {steps[-1].state} (run {steps[-1].run_id}): nothing to drill")
        return False
    app.start()
    out(f"[{_clock(started)}] application: run {app.run} producing {app.rate:g} Avro records/s to topic1")
    time.sleep(10)
    steps.append(healthy(run, lambda line: out(f"[{_clock(started)}] {line}")))
    age = checkpointed(topology, app, timeout=90)
    out(f"[{_clock(started)}] group {GROUP} checkpointed in {SERVING} " + (f"{age:.0f} s ago" if age else "(none yet)"))
    app.hold_consumer()
    time.sleep(HOLD_S)
    killed = stack.stop(FAILED)
    time.sleep(1)  # acknowledgements dc1 sent before it died reach the producer's callbacks
    acknowledged_by_failed = set(app.tally.acknowledged)
    behind = len(acknowledged_by_failed - set(app.tally.consumed))
    out(f"[{_clock(started)}] DISASTER: {FAILED} lost: {', '.join(killed)} killed ({app_counts()}; the consumer is "
        f"{behind} records behind)")  # fmt: skip
    steps.append(run("dr_failover", {"failed_cluster": FAILED, "target_cluster": SERVING, "mode": "disaster"}))
    if steps[-1].state != "success":
        app.stop()
        out(f"[{_clock(started)}] stopped: dr_failover {steps[-1].state} (run {steps[-1].run_id})")
        return False
    app.release_consumer()
    time.sleep(15)  # the application goes on in dc2
    # Once the consumer has what dc2 acknowledged, it has read dc2 to past every copy (each partition in order).
    app.wait_consumed(set(app.tally.acknowledged) - acknowledged_by_failed, 120)
    unread = len(acknowledged_by_failed - set(app.tally.consumed))
    out(f"[{_clock(started)}] the consumer read {SERVING}: {unread} records {FAILED} had acknowledged are not there")
    out(f"[{_clock(started)}] {FAILED} back: {', '.join(stack.start(FAILED))} started ({app_counts()})")
    back = {"restored_cluster": FAILED, "serving_cluster": SERVING, "mode": "data_kept", "unreplicated": "republish"}
    steps.append(run("dr_failback", back))
    time.sleep(10)  # the application goes on in dc1
    app.stop_producing()
    drained = app.drain(120)
    steps.append(healthy(run, lambda line: out(f"[{_clock(started)}] {line}")))
    app.stop()
    out("")
    out(summary(app, steps, drained, behind, unread))
    out("")
    out(f"Airflow UI: {local_airflow.url} (user {USER}, password {PASSWORD})")
    out(f"Kafka DR page: {local_airflow.url}/kafka-dr/")
    out(f"The application's Kafka client messages: {subdir('demo') / 'clients.log'}")
    out(
        "Airflow, the replicators and the stack keep running: stop them with `kafka-dr airflow down`, "
        "`kafka-dr replicators stop` and `kafka-dr local down`."
    )
    tally = app.tally
    counts = (tally.lost, tally.duplicated, len(tally.refused), tally.unacknowledged)
    return all(s.state == "success" for s in steps) and drained and counts == (0, 0, 0, 0)


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
            moves += client_switch.switch(topology, [state.alias], state.home, "kafka-dr demo: the drill's start")
    return moves


def trigger_and_wait(
    api: AirflowRest,
    dag_id: str,
    conf: dict[str, Any],
    progress: Callable[[str], None],
    approver: AirflowRest | None = None,
) -> Step:
    """One DAG run through the REST API, followed to its end, with its report when it wrote one. With `approver`, a
    task that awaits a person's input (the `approve` of a failover) is approved as that user, as an on-call
    engineer's script would."""
    begun = time.monotonic()
    run_id = api.trigger(dag_id, conf)["dag_run_id"]

    def approve(task_id: str) -> None:
        if approver is not None:
            answer = approver.answer(dag_id, run_id, task_id, "Approve")
            progress(f"{dag_id}: {task_id} approved by {(answer.get('responded_by') or {}).get('name')}")

    ended = api.wait(dag_id, run_id, RUN_TIMEOUT, progress, approve)
    starts = [ti["start_date"] for ti in api.task_instances(dag_id, run_id) if ti.get("start_date")]
    delay = None
    if starts and ended.get("queued_at"):
        delay = (epoch_ms(min(starts), "task start") - epoch_ms(ended["queued_at"], "run queued")) / 1000
    path = report_path(dag_id, run_id)
    report = json.loads(path.read_text()) if path.exists() else None
    return Step(dag_id, run_id, ended["state"], time.monotonic() - begun, delay, report)


def checkpointed(topology: Topology, app: DemoApplication, timeout: float) -> float | None:
    """Until the flow out of the failed DC has checkpointed the application's group in the serving DC (a disaster
    failover resumes the group there, so it re-reads what it consumed since); returns that checkpoint's age."""
    flow = next(f for f in topology.flows if f.source == FAILED and f.target == SERVING)
    config = client_config(topology.cluster(SERVING))
    deadline = time.monotonic() + timeout
    while True:
        groups, at_ms = load_checkpoints(config, flow.name)
        if (GROUP in groups and at_ms is not None and app.tally.consumed) or time.monotonic() >= deadline:
            return None if at_ms is None or GROUP not in groups else time.time() - at_ms / 1000
        time.sleep(2)


def healthy(run: Callable[[str, dict[str, Any]], Step], out: Callable[[str], None]) -> Step:
    """dr_replication_health until a run passes (no flow ERR), HEALTH_TRIES at most; says why a run failed."""
    step = run("dr_replication_health", {})
    for _ in range(HEALTH_TRIES - 1):
        if step.state == "success":
            break
        for path in sorted(subdir("health").glob("*.json")):
            flow = json.loads(path.read_text())
            if flow.get("status") == "ERR":
                out(f"  {flow['name']}: ERR {'; '.join(flow.get('problems', []))}")
        time.sleep(10)
        step = run("dr_replication_health", {})
    return step


def summary(app: DemoApplication, steps: list[Step], drained: bool, behind: int, unread: int) -> str:
    """The drill's table: the producer's and the consumer's counts, then each DAG run's figures. `behind`: records
    acknowledged by dc1 the consumer had not read when dc1 was lost; `unread`: those of them it never found in dc2
    (what the failover lost, as the application sees it, before the failback republishes it)."""
    tally = app.tally
    failover = next((s for s in steps if s.dag_id == "dr_failover"), None)
    failback = next((s for s in steps if s.dag_id == "dr_failback"), None)
    rows = [
        ("records sent by the producer", str(tally.sent)),
        ("  acknowledged by a cluster", str(len(tally.acknowledged))),
        ("  refused (an error no retry mends)", str(len(tally.refused))),
        ("  never acknowledged (left at the end)", str(tally.unacknowledged)),
        ("sends retried by the producer", str(tally.resent)),
        ("consumer behind when dc1 was lost", str(behind)),
        ("  acknowledged by dc1, not found in dc2", str(unread)),
        ("records consumed (distinct)", str(len(set(tally.consumed)))),
        ("records lost (acknowledged, never consumed)", f"{tally.lost}" + ("" if drained else " (not caught up)")),
        ("records read twice from Kafka", str(tally.read_twice)),
        ("  delivered twice (after de-duplication)", str(tally.duplicated)),
        ("failover RPO (records not replicated)", _report(failover, "rpo", "records")),
        ("failover RTO (s; the approval's wait left out)", _report(failover, "rto_seconds")),
        ("  triggered by, approved by", f"{_report(failover, 'triggered_by')}, {_report(failover, 'approved_by')}"),
        ("  approval waited (s)", _report(failover, "approval_wait_seconds")),
        ("failback unreplicated, republished", _report(failback, "unreplicated", "records")),
        ("failback RTO (s; the approval's wait left out)", _report(failback, "rto_seconds")),
        ("  triggered by, approved by", f"{_report(failback, 'triggered_by')}, {_report(failback, 'approved_by')}"),
        ("  approval waited (s)", _report(failback, "approval_wait_seconds")),
    ]
    width = max(len(name) for name, _ in rows)
    lines = [f"{name.ljust(width)}  {value}" for name, value in rows]
    lines += ["", f"{'DAG run'.ljust(22)} {'state':8} {'seconds':>8} {'scheduler delay (s)':>20}"]
    for s in steps:
        delay = "-" if s.scheduler_delay is None else f"{s.scheduler_delay:.1f}"
        lines.append(f"{s.dag_id.ljust(22)} {s.state:8} {s.seconds:8.0f} {delay:>20}")
    return "\n".join(lines)


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


def _client_log(folder: Path) -> logging.Logger:
    """The application's librdkafka messages, in FOLDER/clients.log (the terminal shows the drill's own lines)."""
    logger = logging.getLogger("kafka_dr.demo.clients")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    if not logger.handlers:
        handler = logging.FileHandler(folder / "clients.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
    return logger
