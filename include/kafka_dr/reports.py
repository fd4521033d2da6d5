"""What the DR reports share (docs/design.md "Reports"; each phase builds its own: kafka_dr.failover.report,
kafka_dr.failback.report, kafka_dr.backfill.report): the RTO and the steps' timing, as JSON fields and as the table
of the Markdown page. Steps are the {"started", "ended"} that a task records (`Step`), or a job's own "seconds"."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .codec import encode
from .paths import state_dir

REPORT_DAGS = ("dr_failover", "dr_failback", "dr_backfill")

Step = Mapping[str, str]  # when a step's task ran: {"started", "ended"}, UTC ISO with milliseconds


@dataclass(frozen=True)
class Approval:
    """The `approve` step's answer: who approved and how long the request waited for them; `step`: asked to
    answered."""

    approved_by: str
    wait_seconds: float
    step: Step | None = None


def run_start(run_started: datetime | None, validated: Step | None) -> datetime:
    """The run's start: as Airflow recorded it, or its validation step's start when that is earlier (Airflow moves
    the start of a run resumed by clearing its failed tasks to the clear, after clients may have moved); ValueError
    without either."""
    starts = [run_started] if run_started is not None else []
    if validated and validated.get("started"):
        starts.append(datetime.fromisoformat(validated["started"]))
    if not starts:
        raise ValueError("report: the run has no recorded start and its validation no step")
    return min(starts)


def rto_seconds(run_started: datetime, clients_switched: Step | None) -> float | None:
    """Seconds from the run's start to the end of the step that switched the clients; None when that step
    never ended, because then the clients were not switched."""
    ended = (clients_switched or {}).get("ended")
    return None if ended is None else round((datetime.fromisoformat(ended) - run_started).total_seconds(), 3)


def switch_times(run_started: datetime, clients_switched: Step | None, approval: Approval | None) -> dict[str, Any]:
    """A switch's RTO fields: who approved and how long that waited (None: no approval asked), `rto_seconds` the
    machine's time (trigger to clients switched, the wait for a person left out) and `rto_with_approval_seconds`
    (the wait in)."""
    with_approval = rto_seconds(run_started, clients_switched)
    wait = None if approval is None else approval.wait_seconds
    return {
        "approved_by": None if approval is None else approval.approved_by,
        "approval_wait_seconds": wait,
        "rto_seconds": None if with_approval is None else round(with_approval - (wait or 0.0), 3),
        "rto_with_approval_seconds": with_approval,
    }


def without_step(result: Any) -> dict[str, Any] | None:
    """A step's result as a report shows it: its JSON (kafka_dr.codec) less its timing, which the steps table has;
    None for a step that did not run."""
    return None if result is None else {k: v for k, v in encode(result).items() if k != "step"}


def approval_line(body: Mapping[str, Any]) -> str:
    """The page's line on who started a switch and who approved it after how long."""
    approved = (
        f"approved by {body['approved_by']} after {body['approval_wait_seconds']} s "
        f"(RTO with the approval: {body['rto_with_approval_seconds']} s)"
        if body.get("approved_by")
        else "no approval asked"
    )
    return f"- triggered by {body.get('triggered_by') or 'unknown'}; {approved}"


def step_seconds(step: Mapping[str, Any]) -> float | None:
    """A step's duration: the seconds its job reported, else ended - started; None for a step with no end."""
    if "seconds" in step:
        return step["seconds"]
    if not step.get("started") or not step.get("ended"):
        return None
    return round((datetime.fromisoformat(step["ended"]) - datetime.fromisoformat(step["started"])).total_seconds(), 3)


def step_table(steps: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The Markdown table of a report page: each step's start, end and seconds."""
    rows = [
        f"| {name} | {step.get('started', '')} | {step.get('ended', '')} | {cell(step_seconds(step))} |"
        for name, step in steps.items()
    ]
    return ["", "| step | started | ended | seconds |", "|---|---|---|---|", *rows]


def cell(value: Any) -> str:
    """A figure on a report page: empty when unknown."""
    return "" if value is None else str(value)


def latest_reports() -> dict[str, dict[str, Any] | None]:
    """The newest report (by file time) of each of REPORT_DAGS, summed up; None where there is none."""
    directory = state_dir() / "reports"  # read only: a dashboard makes no folder
    latest: dict[str, dict[str, Any] | None] = {}
    for dag_id in REPORT_DAGS:
        try:
            newest = max(directory.glob(f"{dag_id}-*.json"), key=lambda p: p.stat().st_mtime, default=None)
        except OSError:  # a report removed while listed: the next refresh sees the rest
            newest = None
        latest[dag_id] = None if newest is None else _report(dag_id, newest)
    return latest


def summarize(dag_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """A report's title and figures (RPO, RTO; a backfill's copies), as the dashboard and the alerts show them.
    Raises KeyError, TypeError or ValueError for a body that is not such a report."""
    return _SUMMARIES[dag_id](body)


def _report(dag_id: str, path: Path) -> dict[str, Any]:
    """A report's figures for the dashboard (reports.py writes them): what it was, RPO, RTO, when."""
    found: dict[str, Any] = {"dag_id": dag_id, "run_id": None, "file": str(path), "error": None}
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
        written = datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat(timespec="seconds")
        return {**found, "run_id": body.get("run_id"), "written_at": written, **summarize(dag_id, body)}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return {**found, "error": f"unreadable: {type(exc).__name__}: {exc}"}


def _failover(body: Mapping[str, Any]) -> dict[str, Any]:
    rpo = body["rpo"]
    exact = rpo.get("exact_after_failback")
    return {
        "title": f"{body['failed_cluster']} -> {body['target_cluster']} ({body['mode']}"
        + (", dry run)" if body.get("dry_run") else ")"),
        "started": body.get("run_started"),
        "rpo_records": number(rpo.get("records")),
        "rpo_exact": bool(rpo.get("exact")),
        "rpo_exact_after_failback": None if exact is None else number(exact.get("records")),
        "rto_seconds": number(body.get("rto_seconds")),
        **_approval(body),
    }


def _failback(body: Mapping[str, Any]) -> dict[str, Any]:
    dry_run = ", dry run" if body.get("dry_run") else ""
    return {
        "title": f"{body['serving_cluster']} -> {body['restored_cluster']} ({body['mode']}{dry_run})",
        "started": body.get("run_started"),
        "rpo_records": number(body["unreplicated"].get("records")),  # what never left the lost cluster: exact RPO
        "rpo_exact": True,
        "rto_seconds": number(body.get("rto_seconds")),
        **_approval(body),
    }


def _approval(body: Mapping[str, Any]) -> dict[str, Any]:
    """Who started a switch, who approved it and the wait (None: not asked, or a report from before approvals)."""
    return {
        "triggered_by": body.get("triggered_by"),
        "approved_by": body.get("approved_by"),
        "approval_wait_seconds": number(body.get("approval_wait_seconds")),
    }


def _backfill(body: Mapping[str, Any]) -> dict[str, Any]:
    verify = body.get("verify") or {}
    return {
        "title": f"flow {body['flow']}" + (" (dry run)" if body.get("dry_run") else ""),
        "started": (body.get("step") or {}).get("started"),
        "copied": number(body.get("copied")),
        "verify": verify.get("status"),
    }


def number(value: Any) -> int | float | None:
    """A report's (or a drill's evidence's) figure: a number, or None when not known; anything else makes the file
    unreadable."""
    if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
        return value
    raise TypeError(f"not a number: {value!r}")


def _drill(body: Mapping[str, Any]) -> dict[str, Any]:
    verdict = "passed" if body["passed"] else f"FAILED: {body.get('failure')}"
    return {
        "title": f"drill {body['scenario']} {body['from_cluster']} -> {body['to_cluster']} {verdict}",
        "started": body.get("started"),
        "rpo_records": number((body.get("rpo") or {}).get("records")),
        "rpo_exact": bool((body.get("rpo") or {}).get("exact")),
        "rto_seconds": number(body.get("rto_seconds")),
        "passed": bool(body["passed"]),
    }


_SUMMARIES = {"dr_failover": _failover, "dr_failback": _failback, "dr_backfill": _backfill, "dr_drill": _drill}
