"""The run start and step times of a DAG run, as its tasks record them, and a failover's and a failback's plan: for
the report tests of each phase and the tasks' tests."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from kafka_dr.failback.plan import FailbackPlan
from kafka_dr.failover.plan import FailoverPlan

RUN_START = datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC)


def at(seconds: float) -> str:
    """A step time as the tasks record it (UTC ISO with milliseconds), `seconds` after the run started."""
    return datetime.fromtimestamp(RUN_START.timestamp() + seconds, UTC).isoformat(timespec="milliseconds")


def failover_plan(**changes: Any) -> FailoverPlan:
    """The plan of a disaster failover dc1 -> dc2 of flow orders-flow, validated half a second into the run."""
    plan = FailoverPlan(
        topology="t.yaml",
        failed="dc1",
        target="dc2",
        mode="disaster",
        groups=".*",
        flows=("orders-flow",),
        stop_flows=("orders-flow",),
        step={"started": at(0.5), "ended": at(1.0)},
    )
    return replace(plan, **changes)


def failback_plan(**changes: Any) -> FailbackPlan:
    """The plan of a data_kept failback of dc1 (id dc1-id) from dc2 that stops on records that never left (`report`),
    over flow f out of dc1."""
    plan = FailbackPlan(
        topology="t.yaml",
        restored="dc1",
        restored_cluster_id="dc1-id",
        serving="dc2",
        mode="data_kept",
        unreplicated="report",
        groups=".*",
        dry_run=False,
        flows_out=("f",),
        flows_back=(),
    )
    return replace(plan, **changes)
