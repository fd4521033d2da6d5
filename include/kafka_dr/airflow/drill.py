"""Tasks of the dr_drill DAG: a game day run as code. kafka_dr.drill holds the logic (drill.steps: what the steps do
and wait for; drill.report: the evidence); these tasks read params, context and connections, call it, fail with its
one line, and return dicts with their `step` times for the evidence's timeline.

validate -> open the ledger (one drill at a time; none after a drill that left production changed) -> flows healthy
-> preview -> approve (approval `skip`: one approval for the whole drill; `as_topology`: each inner run asks) -> probe
started -> (disaster: the DC cut off) -> dr_failover -> the probe's consumer caught up in the target -> (disaster: the
DC back) -> dr_failback -> probe stopped and counted -> flows healthy -> evidence. The evidence task runs whatever
happened before it: a drill that fails half-way still leaves its evidence, says what it left, and fails the run.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from airflow.sdk import get_current_context, task
from airflow.sdk.exceptions import AirflowFailException, AirflowRuntimeError, AirflowSkipException

from ..access import ClusterAccess
from ..clients import ClientConfigError
from ..codec import decode
from ..drill import cutoff, steps
from ..drill.evidence import write_evidence
from ..drill.ledger import DrillRefused
from ..drill.plan import INNER_RUNS, DrillError, inner_run_id
from ..drill.probe_process import ProbeError
from ..drill.report import DAG_ID, RunFacts, StepResults, conclude
from ..drill.run import DrillRun
from ..topology import TopologyError, load_topology
from . import topology_path
from .common import timed, typed
from .hooks.alerts import send_report_alert
from .hooks.kafka_cluster import cluster_access
from .operators.approval import offer_for_approval
from .operators.trigger_or_wait import TriggerOrWaitDagRunOperator

log = logging.getLogger(__name__)

Result = dict[str, Any] | None


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


@contextlib.contextmanager
def _failing(run: DrillRun) -> Iterator[None]:
    """A step's one-line error fails the task, and is kept in the run's folder for the evidence (DrillRun.record_
    failure)."""
    try:
        yield
    except (DrillError, DrillRefused, ProbeError) as exc:
        run.record_failure(get_current_context()["ti"].task_id, str(exc))
        raise AirflowFailException(str(exc)) from None


def _access(run: DrillRun) -> ClusterAccess:
    """How this task reaches the drill's clusters (their Airflow connections, `kafka_dr_<cluster>` and
    `kafka_dr_<cluster>_registry`; the probe process gets them in its environment, never on its command line)."""
    return cluster_access(load_topology(run.topology))


@task(multiple_outputs=False)
@typed
def validate_drill(params: dict[str, Any] | None = None) -> DrillRun:
    """Every param against the topology, and (disaster) that the DC can be cut off here, before anything changes."""
    params = params or {}
    try:
        path = topology_path(params.get("topology"))
        topo = load_topology(path)
        cluster_access(topo)  # a connection's bad settings: one line, before anything changes
        run = DrillRun.check(topo, path, params, get_current_context()["run_id"])
    except (TopologyError, ClientConfigError, DrillError) as exc:
        raise AirflowFailException(str(exc)) from None
    return run


@task(multiple_outputs=False)
@typed
@timed
def open_ledger(run: DrillRun) -> dict[str, Any]:
    """Record what the drill must put back; refuses while another drill runs or an earlier one left something."""
    context = get_current_context()
    access = _access(run)

    def running(run_id: str) -> bool:
        return context["ti"].get_dagrun_state(DAG_ID, run_id) in ("running", "queued")

    with _failing(run):
        before, note = steps.open_ledger(context["run_id"], access, run.drill, running)
    return {"before": before, "note": note}


@task(multiple_outputs=False)
@typed
@timed
def health_before(run: DrillRun) -> dict[str, Any]:
    """No drill on a sick deployment: every flow healthy (up to HEALTH_WAIT_S for a fresh flow's first checkpoint)."""
    access = _access(run)
    with _failing(run):
        return steps.healthy_before(access)


@task(multiple_outputs=False, task_id="preview")
@typed
@timed
def preview_drill(run: DrillRun) -> dict[str, Any]:
    """What the drill will do, for its approval: real switches of the topology's clients, and back."""
    drill = run.drill
    page = steps.preview_page(drill)
    offer_for_approval(
        get_current_context(), f"DR drill {drill.scenario} {drill.from_cluster} -> {drill.to_cluster}",
        drill.from_cluster, page,
    )  # fmt: skip
    log.info("%s", page)
    return {"page": page}


@task(multiple_outputs=False, trigger_rule="none_failed")  # after `approve`, skipped when each switch asks
@typed
@timed
def start_probe(run: DrillRun) -> dict[str, Any]:
    """The probe application, producing and consuming through the topology's aliases; for a disaster, until the flow
    has copied its records into the target and checkpointed its group since (the failover resumes it from there)."""
    access = _access(run)
    with _failing(run):
        return steps.start_probe(run, access)


@task(multiple_outputs=False)
@typed
@timed
def cut_off(run: DrillRun) -> dict[str, Any]:
    """The disaster: the probe's consumer held, then the DC's broker and registry killed (steps.cut_off); a planned
    drill skips it."""
    if not run.drill.disaster:
        raise AirflowSkipException("planned")
    with _failing(run):
        return steps.cut_off(run, load_topology(run.topology))


@task(multiple_outputs=False, trigger_rule="none_failed")
@typed
@timed
def after_failover(run: DrillRun) -> dict[str, Any]:
    """The probe's consumer reads on in the target (steps.catch_up)."""
    return steps.catch_up(run)


@task(multiple_outputs=False, trigger_rule="all_done")
@typed
@timed
def bring_back(run: DrillRun | None) -> dict[str, Any]:
    """The cut-off DC started again with its data, for the failback; also after a failover that failed (rejected, timed
    out), so that a drill never leaves a DC cut off. Skipped when no cut was tried (a planned drill, or a run ended
    before it, validate_drill's failure included: `run` is None then)."""
    if run is None or not run.cut_tried():
        raise AirflowSkipException("no cut-off was tried")
    with _failing(run):
        started = cutoff.bring_back(load_topology(run.topology), run.drill.from_cluster)
    print(f"{run.drill.from_cluster} back ({started})")
    return {"started": started}


@task(multiple_outputs=False, trigger_rule="none_failed")
@typed
@timed
def stop_probe(run: DrillRun) -> dict[str, Any]:
    """The probe stops producing, its consumer drains, and its last counts are kept in the run's folder."""
    return steps.stop_probe(run)


@task(multiple_outputs=False)
@typed
@timed
def health_after(run: DrillRun) -> dict[str, Any]:
    """Every flow healthy again after the round trip (the evidence's verdict; up to HEALTH_WAIT_S)."""
    return steps.wait_healthy(_access(run))


def _inner_states(context: Any) -> dict[str, str]:
    """The state of each inner run the drill triggered, by step."""
    states = {}
    for step, dag_id in INNER_RUNS.items():
        try:
            state = context["ti"].get_dagrun_state(dag_id, inner_run_id(context["run_id"], step))
        except AirflowRuntimeError:  # the drill ended before it triggered this run
            continue
        states[step] = str(getattr(state, "value", state))
    return states


def _facts(context: Any, params: dict[str, Any]) -> RunFacts:
    from airflow.configuration import conf

    return RunFacts(
        run_id=context["run_id"],
        triggered_by=context["dag_run"].triggering_user_name,
        started=context["dag_run"].start_date.isoformat(timespec="milliseconds"),
        params=params,
        inner_states=_inner_states(context),
        base_url=conf.get("api", "base_url", fallback="http://localhost:8080").rstrip("/"),
    )


@task(multiple_outputs=False, trigger_rule="all_done")
def drill_report(
    validated: Result = None,
    opened: Result = None,
    health_before: Result = None,
    approved: Result = None,
    probe: Result = None,
    cut: Result = None,
    caught_up: Result = None,
    back: Result = None,
    stopped: Result = None,
    health_after: Result = None,
    params: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The evidence, whatever happened before (each step's result wired in by the DAG; None where it did not run):
    checks, JSON, HTML and PDF in STATE_DIR/drills/; the ledger closed when the drill left nothing changed; the run
    fails with the first failed check's line."""
    context = get_current_context()
    results = StepResults(
        validated=validated, opened=opened, health_before=health_before, approved=approved, probe=probe, cut=cut,
        caught_up=caught_up, back=back, stopped=stopped, health_after=health_after,
    )  # fmt: skip
    run = decode(DrillRun, validated, "drill_report(validated)") if validated else None
    access = _access(run) if run else None
    evidence = conclude(_facts(context, params or {}), run, access, results)
    files = write_evidence(evidence)
    print(f"evidence: {files['json']}, {files['html']}, {files['pdf'] or files['pdf_error']}")
    if access is not None:
        send_report_alert(access.topology, DAG_ID, context["run_id"], {**evidence, "report_file": files["json"]})
    if evidence["failure"] is not None:
        raise AirflowFailException(evidence["failure"])
    return {"passed": True, "evidence": files}
