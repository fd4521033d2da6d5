"""The drill's evidence (its fields: kafka_dr.drill's docstring) assembled from what its steps returned, whatever
happened before: the inner runs and their reports, the timeline, the probe's figures, the checks and the verdict;
the ledger closed when the drill left nothing changed. The report task gathers what only Airflow knows (`RunFacts`)
and writes what this returns (evidence.write_evidence)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from ..access import ClusterAccess
from ..state import now_iso, report_path
from ..topology import DrPolicy
from . import checks, ledger, probe_process
from .plan import INNER_RUNS, inner_run_id
from .run import DrillRun

log = logging.getLogger(__name__)

DAG_ID = "dr_drill"
NOT_STARTED = "the drill did not start: its params were refused (validate_drill)"

Result = Mapping[str, Any] | None


@dataclass(frozen=True)
class StepResults:
    """What each step of the drill returned (with its "step" times, `timed`); None for a step that did not run,
    failed or was skipped."""

    validated: Result = None
    opened: Result = None
    health_before: Result = None
    approved: Result = None
    probe: Result = None
    cut: Result = None
    caught_up: Result = None
    back: Result = None
    stopped: Result = None
    health_after: Result = None


@dataclass(frozen=True)
class RunFacts:
    """What Airflow knows of the drill run: its id, who triggered it and when it started, its params, the state of
    each inner run it triggered (by step; a step missing was never triggered) and the api-server's base URL."""

    run_id: str
    triggered_by: str | None
    started: str
    params: Mapping[str, Any]
    inner_states: Mapping[str, str]
    base_url: str


def _flows(result: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in (result.get("flows") or {}).items())


# The timeline's line for each step that ran, and its detail.
_TIMELINE: dict[str, tuple[str, Callable[[Mapping[str, Any]], Any]]] = {
    "validated": ("params and topology checked", lambda _: ""),
    "opened": ("the state to put back recorded", lambda _: ""),
    "health_before": ("flows healthy", _flows),
    "approved": ("approved", lambda result: f"by {result.get('approved_by')}"),
    "probe": ("probe producing and consuming", lambda _: ""),
    "cut": ("DC cut off", lambda result: result.get("stopped")),
    "caught_up": ("probe reads the target", lambda _: ""),
    "back": ("DC back", lambda result: result.get("started")),
    "stopped": ("probe stopped and counted", lambda _: ""),
    "health_after": ("flows checked", _flows),
}


def inner_runs(facts: RunFacts) -> list[dict[str, Any]]:
    """Each inner run the drill triggered, with its report's figures (the report whole under "report")."""
    runs = []
    for step, dag_id in INNER_RUNS.items():
        if step not in facts.inner_states:
            continue
        run_id = inner_run_id(facts.run_id, step)
        path = report_path(dag_id, run_id)
        body = json.loads(path.read_text()) if path.exists() else {}
        figures = body.get("rpo") if dag_id == "dr_failover" else body.get("unreplicated")
        runs.append({
            "dag_id": dag_id, "run_id": run_id, "state": facts.inner_states[step],
            "url": f"{facts.base_url}/dags/{dag_id}/runs/{run_id}", "report_file": str(path) if path.exists() else None,
            "rpo_records": (figures or {}).get("records"), "rto_seconds": body.get("rto_seconds"),
            "triggered_by": body.get("triggered_by"), "approved_by": body.get("approved_by"), "report": body,
        })  # fmt: skip
    return runs


def timeline(steps: StepResults, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The steps that ran and the inner runs that started, by time."""
    entries = []
    for field in fields(steps):
        result = getattr(steps, field.name)
        if result and result.get("step"):
            what, detail = _TIMELINE[field.name]
            entries.append({"at": result["step"]["started"], "step": what, "detail": detail(result)})
    for run in runs:
        report = run["report"]
        if report.get("run_started"):
            figures = f"RPO {run['rpo_records']}, RTO {run['rto_seconds']} s"
            entries.append({"at": report["run_started"], "step": run["dag_id"], "detail": f"{run['state']}: {figures}"})
    return sorted(entries, key=lambda entry: entry["at"])


def conclude(facts: RunFacts, run: DrillRun | None, access: ClusterAccess | None, steps: StepResults) -> dict[str, Any]:
    """The evidence, with `passed` and the first `failure` (a step's own, else the first failed check's). Kills a
    probe an earlier failed step left running and closes the ledger when the drill left nothing changed."""
    if run is not None and probe_process.kill(run.probe):
        log.warning("the probe still ran (an earlier task failed): killed")
    runs = inner_runs(facts)
    by_dag = {r["dag_id"]: r["report"] or None for r in runs}
    rpo = checks.drill_rpo(run is not None and run.drill.disaster, by_dag.get("dr_failover"), by_dag.get("dr_failback"))
    rto = (by_dag.get("dr_failover") or {}).get("rto_seconds")
    goals = checks.objectives(access.topology.dr if access else DrPolicy(), rpo["records"], rto)
    left = ledger.end(facts.run_id, access) if access else []
    stopped = steps.stopped
    states = {r["dag_id"]: r["state"] for r in runs}
    found = checks.drill_checks(
        [{"dag_id": dag_id, "state": states.get(dag_id)} for dag_id in INNER_RUNS.values()],
        stopped["counts"] if stopped else None, bool(stopped and stopped["drained"]), goals, steps.health_after, left,
    )  # fmt: skip
    failure = (run.first_failure() or checks.first_failure(found)) if run else NOT_STARTED
    params, drill = facts.params, run.drill.to_dict() if run else {}
    return {
        "dag_id": DAG_ID, "run_id": facts.run_id, "scenario": params.get("scenario"),
        "from_cluster": params.get("from_cluster"), "to_cluster": params.get("to_cluster"),
        "probe_topic": drill.get("probe_topic"), "rate": drill.get("rate"), "approval": params.get("approval"),
        "triggered_by": facts.triggered_by, "started": facts.started, "ended": now_iso("milliseconds"),
        "topology_file": run.topology if run else params.get("topology"),
        "topology_sha256": run.topology_sha256 if run else None,
        "runs": [{k: v for k, v in r.items() if k != "report"} for r in runs], "timeline": timeline(steps, runs),
        "rpo": rpo, "rto_seconds": rto, "failback_rto_seconds": (by_dag.get("dr_failback") or {}).get("rto_seconds"),
        "objectives": goals, "probe": probe_figures(steps), "health_before": _health(steps.health_before),
        "health_after": _health(steps.health_after),
        "checks": [{"check": c.check, "passed": c.passed, "detail": c.detail} for c in found], "left": left,
        "passed": failure is None, "failure": failure,
    }  # fmt: skip


def probe_figures(steps: StepResults) -> dict[str, Any] | None:
    """The probe's counts when it was stopped, with how far its consumer was behind at the cut and what it had not
    read after the failover (None where that step did not run)."""
    if not steps.stopped:
        return None
    return {
        **steps.stopped["counts"],
        "behind_at_cut": steps.cut["behind"] if steps.cut else None,
        "unread_after_failover": steps.caught_up.get("unread_after_failover") if steps.caught_up else None,
    }


def _health(result: Result) -> dict[str, Any] | None:
    return None if result is None else {"flows": result.get("flows"), "passed": result.get("passed")}
