"""Tasks of the dr_drill DAG: a game day run as code (kafka_dr.drill holds the logic; these tasks read params and
XComs, call it, and return dicts with their `step` times for the evidence's timeline).

validate -> open the ledger (one drill at a time; none after a drill that left production changed) -> flows healthy
-> preview -> approve (approval `skip`: one approval for the whole drill; `as_topology`: each inner run asks) -> probe
started -> (disaster: the DC cut off) -> dr_failover -> the probe's consumer caught up in the target -> (disaster: the
DC back) -> dr_failback -> probe stopped and counted -> flows healthy -> evidence. The evidence task runs whatever
happened before it: a drill that fails half-way still leaves its evidence, says what it left, and fails the run.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any, NoReturn

from airflow.sdk import get_current_context, task
from airflow.sdk.exceptions import AirflowFailException, AirflowRuntimeError, AirflowSkipException
from confluent_kafka import IsolationLevel, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from ..access import ClusterAccess
from ..clients import ClientConfigError, client_config, end_offsets
from ..drill import checks, cutoff, ledger, probe_process
from ..drill.evidence import write_evidence
from ..drill.plan import INNER_RUNS, DrillError, DrillPlan, inner_run_id, plan_drill
from ..state import now_iso, report_path, safe_name, subdir
from ..topology import DrPolicy, Topology, TopologyError, load_topology
from ..translation.checkpoints import load_checkpoints
from . import topology_path
from .common import timed
from .hooks.alerts import send_report_alert
from .hooks.kafka_cluster import cluster_access
from .hooks.schema_registry import load_registry_credentials
from .operators.approval import offer_for_approval
from .operators.trigger_or_wait import TriggerOrWaitDagRunOperator

log = logging.getLogger(__name__)

DAG_ID = "dr_drill"
HEALTH_WAIT_S = 180.0  # a fresh flow lacks its first checkpoint for a minute: health is asked again meanwhile
HEALTH_EVERY_S = 10.0
CHECKPOINT_WAIT_S = 150.0  # a running flow finds a new probe topic at its next epoch, checkpoints at the one after
HOLD_S = 5.0  # the probe's consumer stops reading this long before the cut: it is behind when the DC is lost
CATCH_UP_S = 120.0
PROBE_PARTITIONS = 3
CUT_MARK = "cut_off_tried"  # in the run's folder: the cut was tried, so the way back must run


def inner_run(step: str, **conf: str) -> TriggerOrWaitDagRunOperator:
    """The drill's `failover` or `failback` task: a real run of that DAG (run id `inner_run_id`, known in advance),
    with `conf` (Jinja over the drill's params) plus the topology and the drill's run and approval, waited for; a
    retried or cleared task waits for the run it triggered before."""
    return TriggerOrWaitDagRunOperator(
        task_id=step,
        trigger_dag_id=INNER_RUNS[step],
        trigger_run_id=inner_run_id("{{ run_id }}", step),
        conf={
            "topology": "{{ params.topology }}",
            "drill_run_id": "{{ run_id }}",
            "drill_approval": "{{ params.approval }}",
            **conf,
        },
        wait_for_completion=True,
        poke_interval=5,  # the inner runs take minutes; their own reports time them
        trigger_rule="none_failed",  # after a disaster's cut-off or way back, skipped in a planned drill
    )


def _fail(plan: dict[str, Any], message: str) -> NoReturn:
    """Fail the task with one line, kept in the run's folder (`failures.txt`): the evidence names the first task
    failure rather than the checks it made fail after it (an inner run never triggered, a probe never stopped)."""
    folder = Path(plan["folder"])
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "failures.txt", "a", encoding="utf-8") as failures:
        failures.write(f"{get_current_context()['ti'].task_id}: {message}\n")
    raise AirflowFailException(message)


def _first_failure(folder: Path | None) -> str | None:
    path = folder / "failures.txt" if folder else None
    lines = path.read_text(encoding="utf-8").splitlines() if path and path.exists() else []
    return lines[0] if lines else None


def _plan(plan: dict[str, Any]) -> tuple[DrillPlan, Topology, Path]:
    return (
        DrillPlan(**{**plan["drill"], "flows": tuple(plan["drill"]["flows"])}),
        _topology(plan["topology"]),
        Path(plan["folder"]),
    )


def _topology(path: str | Path) -> Topology:
    """The topology, its clusters' settings from their Airflow connections (`kafka_dr_<cluster>`,
    `kafka_dr_<cluster>_registry`) put into this process's environment: the drill's steps connect as kafka_dr.clients
    does, from $KDR_CLUSTER_<NAME>_CONFIG and $KDR_REGISTRY_<NAME>_USER_INFO, and so does the probe process they start
    (it inherits them; never on its command line)."""
    topo = load_topology(path)
    os.environ.update(cluster_access(topo).child_environ())
    load_registry_credentials(topo.clusters)
    return topo


@task(multiple_outputs=False)
@timed
def validate_drill(params: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every param against the topology, and (disaster) that the DC can be cut off here, before anything changes."""
    params = params or {}
    context = get_current_context()
    try:
        path = topology_path(params.get("topology"))
        topo = _topology(path)
        drill = plan_drill(topo, params)
        if drill.disaster:
            cutoff.check_commands(topo, drill.from_cluster)
    except (TopologyError, ClientConfigError, DrillError) as exc:
        raise AirflowFailException(str(exc)) from None
    folder = subdir("drill-runs") / safe_name(context["run_id"])
    return {
        "drill": drill.to_dict(),
        "topology": str(path),
        "topology_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "folder": str(folder),
    }


@task(multiple_outputs=False)
@timed
def open_ledger(plan: dict[str, Any]) -> dict[str, Any]:
    """Record what the drill must put back; refuses while another drill runs or an earlier one left something."""
    context = get_current_context()
    drill, topo, _ = _plan(plan)

    def running(run_id: str) -> bool:
        return context["ti"].get_dagrun_state(DAG_ID, run_id) in ("running", "queued")

    earlier = ledger.open_record()  # an earlier drill stopped before its end may have left its probe running
    ended = earlier is not None and earlier["run_id"] != context["run_id"] and not running(earlier["run_id"])
    if ended and probe_process.kill(subdir("drill-runs") / safe_name(earlier["run_id"]) / "probe"):
        log.warning("drill %s ended without stopping its probe: killed", earlier["run_id"])
    try:
        before, note = ledger.begin(context["run_id"], ClusterAccess.from_environ(topo), drill.scenario, running)
    except ledger.DrillRefused as exc:
        _fail(plan, str(exc))
    if note:
        log.warning("%s", note)
    return {"before": before, "note": note}


def wait_healthy(topo: Topology, timeout: float) -> dict[str, Any]:
    """Each flow's health status, asked again every HEALTH_EVERY_S until none is ERR or `timeout` passed."""
    from ..health.check import check_flow  # Kafka reads, only in the task that needs them

    deadline = time.monotonic() + timeout
    while True:
        results = [check_flow(ClusterAccess.from_environ(topo), flow.name) for flow in topo.flows]
        flows = {h.name: h.status for h in results}
        problems = {h.name: h.problems for h in results if h.status == "ERR"}
        if not problems or time.monotonic() >= deadline:
            return {"flows": flows, "passed": not problems, "problems": problems}
        log.info("flows not healthy yet: %s", json.dumps(problems))
        time.sleep(HEALTH_EVERY_S)


@task(multiple_outputs=False)
@timed
def health_before(plan: dict[str, Any]) -> dict[str, Any]:
    """No drill on a sick deployment: every flow healthy (up to HEALTH_WAIT_S for a fresh flow's first checkpoint)."""
    _, topo, _ = _plan(plan)
    health = wait_healthy(topo, HEALTH_WAIT_S)
    if not health["passed"]:
        lines = "; ".join(f"{name}: {', '.join(p)}" for name, p in health["problems"].items())
        _fail(plan, f"flows not healthy before the drill, nothing changed: {lines}")
    return health


@task(multiple_outputs=False, task_id="preview")
@timed
def preview_drill(plan: dict[str, Any]) -> dict[str, Any]:
    """What the drill will do, for its approval: real switches of the topology's clients, and back."""
    drill, _, _ = _plan(plan)
    cut = f"cut {drill.from_cluster} off (the topology's dr.cut_off_command), " if drill.disaster else ""
    mode = "disaster" if drill.disaster else "planned"
    page = (
        f"# DR drill {drill.scenario}: {drill.from_cluster} -> {drill.to_cluster} and back\n\n"
        f"A probe application writes {drill.rate:g} records/s to `{drill.probe_topic}` through the client aliases "
        f"`{drill.producer_alias}` and `{drill.consumer_alias}`. The drill will {cut}run a real {mode} `dr_failover` "
        f"from {drill.from_cluster} to {drill.to_cluster} (flows {', '.join(drill.flows)}), then a `dr_failback` "
        f"(data_kept, republish): every client alias on {drill.from_cluster} moves and comes back.\n\n"
        f"Approval: {'this one approval stands for both runs' if drill.approval == 'skip' else 'each run asks'}.\n"
    )
    offer_for_approval(
        get_current_context(), f"DR drill {drill.scenario} {drill.from_cluster} -> {drill.to_cluster}",
        drill.from_cluster, page,
    )  # fmt: skip
    log.info("%s", page)
    return {"page": page}


def _ensure_probe_topic(plan: dict[str, Any], topo: Topology, drill: DrillPlan) -> None:
    """The probe topic in both clusters, where missing, with the cluster's default replication factor (as the internal
    topics: a production cluster's, not 1)."""
    for cluster in (drill.from_cluster, drill.to_cluster):
        admin = AdminClient(client_config(topo.cluster(cluster)))
        try:
            admin.create_topics([NewTopic(drill.probe_topic, PROBE_PARTITIONS)])[drill.probe_topic].result(30)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                _fail(plan, f"cannot create {cluster}:{drill.probe_topic}: {exc.args[0].str()}")


@task(multiple_outputs=False, trigger_rule="none_failed")  # after `approve`, skipped when each switch asks
@timed
def start_probe(plan: dict[str, Any]) -> dict[str, Any]:
    """The probe application, producing and consuming through the topology's aliases; for a disaster, until the flow
    has copied its records into the target and checkpointed its group since (the failover resumes it from there)."""
    drill, topo, folder = _plan(plan)
    _ensure_probe_topic(plan, topo, drill)
    target = client_config(topo.cluster(drill.to_cluster))
    admin = AdminClient(target)
    # A disaster counts the target's copies before the probe writes: what the flow copies after is the probe's.
    copies_before = _copies_in(admin, drill.probe_topic) if drill.disaster else 0
    try:
        tally = probe_process.start(
            folder / "probe",
            plan["topology"],
            drill.probe_topic,
            drill.producer_alias,
            drill.consumer_alias,
            drill.rate,
        )
    except probe_process.ProbeError as exc:
        _fail(plan, str(exc))
    print(f"probe {tally['run']}: {drill.rate:g} records/s to {drill.probe_topic}", flush=True)
    if drill.disaster:
        _wait_checkpointed(plan, drill, folder, tally["group"], target, admin, copies_before)
    return {"run": tally["run"], "group": tally["group"]}


def _copies_in(admin: AdminClient, topic: str) -> int:
    """Records in the target's probe topic (committed ends summed): before the failover only the flow writes there."""
    partitions = admin.list_topics(topic, timeout=30).topics[topic].partitions
    return sum(end_offsets(admin, [(topic, p) for p in partitions], IsolationLevel.READ_COMMITTED).values())


def _wait_checkpointed(
    plan: dict[str, Any],
    drill: DrillPlan,
    folder: Path,
    group: str,
    target: dict[str, Any],
    admin: AdminClient,
    before: int,
) -> None:
    """A disaster resumes the probe's group from the flow's last checkpoint: wait until the flow copies the probe's
    records into the target and has checkpointed the group since (a checkpoint made before the first copy, as a flow
    that has just found the new probe topic makes, would put the group before every copy: the records the consumer
    had not read at the cut would be read nowhere)."""
    copying_ms = None
    deadline = time.monotonic() + CHECKPOINT_WAIT_S
    while time.monotonic() < deadline:
        if copying_ms is None and _copies_in(admin, drill.probe_topic) > before:
            copying_ms = int(time.time() * 1000)
        groups, at_ms = load_checkpoints(target, drill.flows[0])
        consumed = probe_process.read(folder / "probe").get("consumed")
        if copying_ms is not None and group in groups and at_ms and at_ms >= copying_ms and consumed:
            return
        time.sleep(2)
    _fail(
        plan,
        f"flow {drill.flows[0]} did not copy the probe's records into {drill.to_cluster} and checkpoint its group "
        f"within {CHECKPOINT_WAIT_S:g} s: a disaster failover would have nothing to resume it from",
    )


def _disaster(context: Any) -> bool:
    """`task.run_if` of the disaster's own tasks: a planned drill skips them."""
    return context["params"].get("scenario") == "disaster_round_trip"


@task.run_if(_disaster, skip_message="planned")
@task(multiple_outputs=False)
@timed
def cut_off(plan: dict[str, Any]) -> dict[str, Any]:
    """The disaster: the probe's consumer held HOLD_S first (behind at the cut), then the DC's broker and registry
    killed. Records the probe had acknowledged then, for what the application lost until the failback."""
    drill, topo, folder = _plan(plan)
    probe_process.steer(folder / "probe", consume=False)
    time.sleep(HOLD_S)
    (folder / CUT_MARK).touch()  # from here on, bring_back runs whatever happens (a command may fail half-way)
    try:
        stopped = cutoff.cut_off(topo, drill.from_cluster)
    except DrillError as exc:
        probe_process.steer(folder / "probe", consume=True)
        _fail(plan, str(exc))
    time.sleep(1)  # acknowledgements the DC sent before it died reach the producer's callbacks
    tally = probe_process.read(folder / "probe")
    at_cut = sorted(set(tally.get("acknowledged", [])))
    (folder / "acknowledged_at_cut.json").write_text(json.dumps(at_cut))
    behind = len(set(at_cut) - set(tally.get("consumed", [])))
    print(f"{drill.from_cluster} cut off ({stopped}); the probe's consumer is {behind} behind")
    return {"stopped": stopped, "behind": behind}


@task(multiple_outputs=False, trigger_rule="none_failed")
@timed
def after_failover(plan: dict[str, Any]) -> dict[str, Any]:
    """The probe's consumer reads on in the target: once it has what the target acknowledged since, it has read past
    every copy, and what the failed DC acknowledged that it still lacks is what the disaster lost until the failback."""
    drill, _, folder = _plan(plan)
    probe = folder / "probe"
    probe_process.steer(probe, consume=True)
    cut_file = folder / "acknowledged_at_cut.json"
    at_cut = set(json.loads(cut_file.read_text())) if cut_file.exists() else set()
    deadline = time.monotonic() + CATCH_UP_S
    tally = probe_process.read(probe)
    while time.monotonic() < deadline:
        tally = probe_process.read(probe)
        if set(tally.get("acknowledged", [])) - at_cut <= set(tally.get("consumed", [])):
            break
        time.sleep(1)
    unread = len(at_cut - set(tally.get("consumed", [])))
    print(f"the probe's consumer reads {drill.to_cluster}: {unread} records acknowledged before the cut not there")
    return {"unread_after_failover": unread if drill.disaster else None}


@task(multiple_outputs=False, trigger_rule="all_done")
@timed
def bring_back() -> dict[str, Any]:
    """The cut-off DC started again with its data, for the failback; also after a failover that failed (rejected, timed
    out), so that a drill never leaves a DC cut off. Skipped when no cut was tried (a planned drill, or a run ended
    before it); the plan is read here, not passed, as this task runs also when validate_drill failed."""
    plan = _xcom(get_current_context(), "validate_drill")
    if plan is None or not (Path(plan["folder"]) / CUT_MARK).exists():
        raise AirflowSkipException("no cut-off was tried")
    drill, topo, _ = _plan(plan)
    try:
        started = cutoff.bring_back(topo, drill.from_cluster)
    except DrillError as exc:
        _fail(plan, str(exc))
    print(f"{drill.from_cluster} back ({started})")
    return {"started": started}


@task(multiple_outputs=False, trigger_rule="none_failed")
@timed
def stop_probe(plan: dict[str, Any]) -> dict[str, Any]:
    """The probe stops producing, its consumer drains, and its last counts are kept in the run's folder."""
    _, _, folder = _plan(plan)
    time.sleep(HOLD_S)  # the probe goes on in the DC it is back in
    tally = probe_process.stop(folder / "probe", CATCH_UP_S)
    counts = checks.probe_counts(tally)
    print(f"probe stopped: {json.dumps(counts)}; drained: {tally['drained']}")
    return {"counts": counts, "drained": tally["drained"]}


@task(multiple_outputs=False)
@timed
def health_after(plan: dict[str, Any]) -> dict[str, Any]:
    """Every flow healthy again after the round trip (the evidence's verdict; up to HEALTH_WAIT_S)."""
    _, topo, _ = _plan(plan)
    return wait_healthy(topo, HEALTH_WAIT_S)


def _xcom(context: Any, task_id: str) -> dict[str, Any] | None:
    value = context["ti"].xcom_pull(task_ids=task_id)
    return value if isinstance(value, dict) else None


def _inner_runs(context: Any) -> list[dict[str, Any]]:
    from airflow.configuration import conf

    base = conf.get("api", "base_url", fallback="http://localhost:8080").rstrip("/")
    runs = []
    for step, dag_id in INNER_RUNS.items():
        run_id = inner_run_id(context["run_id"], step)
        try:
            state = context["ti"].get_dagrun_state(dag_id, run_id)
        except AirflowRuntimeError:  # the drill ended before it triggered this run
            continue
        path = report_path(dag_id, run_id)
        body = json.loads(path.read_text()) if path.exists() else {}
        figures = body.get("rpo") if dag_id == "dr_failover" else body.get("unreplicated")
        runs.append({
            "dag_id": dag_id, "run_id": run_id, "state": str(getattr(state, "value", state)),
            "url": f"{base}/dags/{dag_id}/runs/{run_id}", "report_file": str(path) if path.exists() else None,
            "rpo_records": (figures or {}).get("records"), "rto_seconds": body.get("rto_seconds"),
            "triggered_by": body.get("triggered_by"), "approved_by": body.get("approved_by"), "report": body,
        })  # fmt: skip
    return runs


def _timeline(context: Any, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    lines = {
        "validate_drill": "params and topology checked",
        "open_ledger": "the state to put back recorded",
        "health_before": "flows healthy",
        "approve": "approved",
        "start_probe": "probe producing and consuming",
        "cut_off": "DC cut off",
        "after_failover": "probe reads the target",
        "bring_back": "DC back",
        "stop_probe": "probe stopped and counted",
        "health_after": "flows checked",
    }
    timeline = []
    for task_id, what in lines.items():
        result = _xcom(context, task_id)
        if result and result.get("step"):
            detail = {
                "cut_off": result.get("stopped"),
                "bring_back": result.get("started"),
                "approve": f"by {result.get('approved_by')}",
                "health_before": ", ".join(f"{k} {v}" for k, v in (result.get("flows") or {}).items()),
                "health_after": ", ".join(f"{k} {v}" for k, v in (result.get("flows") or {}).items()),
            }.get(task_id, "")
            timeline.append({"at": result["step"]["started"], "step": what, "detail": detail})
    for run in runs:
        report = run["report"]
        if report.get("run_started"):
            figures = f"RPO {run['rpo_records']}, RTO {run['rto_seconds']} s"
            timeline.append(
                {"at": report["run_started"], "step": run["dag_id"], "detail": f"{run['state']}: {figures}"}
            )
    return sorted(timeline, key=lambda entry: entry["at"])


@task(multiple_outputs=False, trigger_rule="all_done")
def drill_report(params: dict[str, Any] | None = None) -> dict[str, Any]:
    """The evidence, whatever happened before: checks, JSON, HTML and PDF in STATE_DIR/drills/; the ledger closed when
    the drill left nothing changed; the run fails with the first failed check's line."""
    context = get_current_context()
    params = params or {}
    plan = _xcom(context, "validate_drill")
    folder = Path(plan["folder"]) if plan else None
    if folder is not None and probe_process.kill(folder / "probe"):
        log.warning("the probe still ran (an earlier task failed): killed")
    drill = plan["drill"] if plan else {}
    topo = _topology(plan["topology"]) if plan else None
    runs = _inner_runs(context)
    by_dag = {run["dag_id"]: run["report"] or None for run in runs}
    disaster = params.get("scenario") == "disaster_round_trip"
    rpo = checks.drill_rpo(disaster, by_dag.get("dr_failover"), by_dag.get("dr_failback"))
    rto = (by_dag.get("dr_failover") or {}).get("rto_seconds")
    goals = checks.objectives(topo.dr if topo else DrPolicy(), rpo["records"], rto)
    stopped = _xcom(context, "stop_probe")
    left = ledger.end(context["run_id"], ClusterAccess.from_environ(topo)) if topo else []
    health = _xcom(context, "health_after")
    states = {run["dag_id"]: run["state"] for run in runs}
    found = checks.drill_checks(
        [{"dag_id": dag_id, "state": states.get(dag_id)} for dag_id in INNER_RUNS.values()],
        stopped["counts"] if stopped else None, bool(stopped and stopped["drained"]), goals, health, left,
    )  # fmt: skip
    failure = _first_failure(folder) or checks.first_failure(found)
    if plan is None:
        failure = "the drill did not start: its params were refused (validate_drill)"
    cut, caught_up = _xcom(context, "cut_off"), _xcom(context, "after_failover")
    probe = None
    if stopped:
        probe = {
            **stopped["counts"],
            "behind_at_cut": cut["behind"] if cut else None,
            "unread_after_failover": caught_up.get("unread_after_failover") if caught_up else None,
        }
    evidence = {
        "dag_id": DAG_ID, "run_id": context["run_id"], "scenario": params.get("scenario"),
        "from_cluster": params.get("from_cluster"), "to_cluster": params.get("to_cluster"),
        "probe_topic": drill.get("probe_topic"), "rate": drill.get("rate"), "approval": params.get("approval"),
        "triggered_by": context["dag_run"].triggering_user_name,
        "started": context["dag_run"].start_date.isoformat(timespec="milliseconds"), "ended": now_iso("milliseconds"),
        "topology_file": plan["topology"] if plan else params.get("topology"),
        "topology_sha256": plan["topology_sha256"] if plan else None,
        "runs": [{k: v for k, v in run.items() if k != "report"} for run in runs],
        "timeline": _timeline(context, runs), "rpo": rpo, "rto_seconds": rto,
        "failback_rto_seconds": (by_dag.get("dr_failback") or {}).get("rto_seconds"), "objectives": goals,
        "probe": probe, "health_before": _health(_xcom(context, "health_before")), "health_after": _health(health),
        "checks": [{"check": c.check, "passed": c.passed, "detail": c.detail} for c in found], "left": left,
        "passed": failure is None, "failure": failure,
    }  # fmt: skip
    files = write_evidence(evidence)
    print(f"evidence: {files['json']}, {files['html']}, {files['pdf'] or files['pdf_error']}")
    if topo is not None:
        send_report_alert(topo, DAG_ID, context["run_id"], {**evidence, "report_file": files["json"]})
    if failure is not None:
        raise AirflowFailException(failure)
    return {"passed": True, "evidence": files}


def _health(result: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if result is None else {"flows": result.get("flows"), "passed": result.get("passed")}
