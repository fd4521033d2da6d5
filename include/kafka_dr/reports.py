"""What the DR reports share (docs/design.md "Reports"; each phase builds its own: kafka_dr.failover.report,
kafka_dr.failback.report, kafka_dr.backfill.report): the RTO and the steps' timing, as JSON fields and as the table
of the Markdown page. Steps are the {"started", "ended"} that a task's `timed` records, or a job's own "seconds"."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any


def run_start(run_started: datetime | None, validated: Mapping[str, Any] | None) -> datetime:
    """The run's start as Airflow recorded it, else its validation step's start; ValueError without either."""
    if run_started is not None:
        return run_started
    if not validated or not validated.get("started"):
        raise ValueError("report: the run has no recorded start and its validation no step")
    return datetime.fromisoformat(validated["started"])


def rto_seconds(run_started: datetime, clients_switched: Mapping[str, Any] | None) -> float | None:
    """Seconds from the run's start to the end of the step that switched the clients; None when that step
    never ended, because then the clients were not switched."""
    ended = (clients_switched or {}).get("ended")
    return None if ended is None else round((datetime.fromisoformat(ended) - run_started).total_seconds(), 3)


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
