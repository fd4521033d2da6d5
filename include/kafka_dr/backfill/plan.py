"""A dr_backfill run's plan, checked by validation against the source; it travels to the backfill job's operator
and the report as plain JSON (XCom) through kafka_dr.codec, a field per operator argument."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..access import ClusterAccess
from ..reports import Step
from ..topology import Flow
from .window import parse_window, prepare


@dataclass(frozen=True)
class BackfillPlan:
    """Backfill `flow`'s window (window_start / window_end as ISO times, or `offsets` {"topic:partition": [first,
    last]}) of the topics matching `topics` into `target_topics` (named by the `target_topic` format, else the
    flow's rename). `step`: when validation ran, for the report."""

    topology: str
    flow: str
    topics: str | None
    window_start: str | None
    window_end: str | None
    offsets: Mapping[str, list[int]] | None
    target_topic: str | None
    dry_run: bool
    target_topics: tuple[str, ...]
    step: Step | None = None

    @classmethod
    def build(
        cls,
        access: ClusterAccess,
        topology_file: str,
        flow: Flow,
        window_start: str | None,
        window_end: str | None,
        offsets: str | Mapping[str, Any] | None,
        topics: str | None,
        target_topic: str | None,
        dry_run: bool,
    ) -> BackfillPlan:
        """The window checked against the source (offsets past the end, topics outside the flow, a target that would
        take the copies out of order: kafka_dr.backfill.window.prepare). Raises BackfillError, UnreachableError or
        TopologyError with one line."""
        window = parse_window(window_start, window_end, offsets)
        prepared = prepare(access, flow, window, topics, target_topic, 1)
        prepared.context.close()
        return cls(
            topology_file,
            flow.name,
            topics,
            window_start,
            window_end,
            window.to_dict()["offsets"] if window.offsets is not None else None,
            target_topic,
            dry_run,
            tuple(sorted({w.dest_topic for w in prepared.windows})),
        )


def idle_reason(run_type: str) -> str | None:
    """Why a dr_backfill run copies nothing, or None when it copies: the DAG is unpaused so that a manual trigger
    and Airflow's own backfill start at once; its hourly data intervals are there for Airflow's backfill, and a
    scheduled run would target the past hour of a flow that already copies it."""
    if run_type == "scheduled":
        return "a scheduled run copies nothing: trigger dr_backfill, or run Airflow's backfill over past hours"
    return None
