"""Self-healing of dr_replication_health: restart a continuous replicator whose process is gone.

Only that: a restart resumes copying exactly where the destination says (replication.resume), so it is safe,
and it is all a dead process needs. It never "fixes" GAP, REWIND, DRIFT or CYCLE (those need an operator's
decision), and it gives up after RESTARTS_PER_HOUR restarts of a flow in an hour: a replicator that keeps
dying has a reason a restart will not remove.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ..access import ClusterAccess
from ..replication import replicators
from ..state import locked, subdir, write_json
from .rules import REPLICATOR_STOPPED, FlowHealth

RESTARTS_PER_HOUR = 3
NEEDS_AN_OPERATOR = frozenset({"GAP", "REWIND", "DRIFT", "CYCLE"})


def heal(health: FlowHealth, access: ClusterAccess, now: float | None = None) -> dict[str, Any] | None:
    """Restart the flow's tracked replicator if it should run and its process is gone (the rules make that flow
    STOP), handing it the clusters' settings of `access`; returns what was done and why ({"flow", "action",
    "reason"}), None when there was nothing to do."""
    replicator = replicators.status(health.name)
    if replicator is None or replicator.stopped_at is not None:
        return None  # none should run (never started, or stopped on purpose)
    # Its pid answers where it was started; elsewhere the health check asked its target (sampler._alive).
    if replicator.running if replicator.here else REPLICATOR_STOPPED not in health.problems:
        return None  # it runs
    now = time.time() if now is None else now
    blocking = sorted({p.status for p in health.partitions} & NEEDS_AN_OPERATOR)
    if blocking:
        return _action(health.name, "not restarted", f"replicator dead, but {', '.join(blocking)} needs an operator")
    history = _history_file(health.name)
    with locked(history):
        recent = [t for t in _read_history(history) if now - t < 3600]
        if len(recent) >= RESTARTS_PER_HOUR:
            return _action(
                health.name,
                "not restarted",
                f"{len(recent)} restarts in the last hour (limit {RESTARTS_PER_HOUR}); last error: "
                f"{replicators.last_error(health.name)}",
            )
        why = replicators.last_error(health.name)  # of the dead run, before the new one logs
        restarted, _ = replicators.start(health.name, replicator.command, env=access.child_environ())
        write_json(history, [*recent, now])
    return _action(
        health.name,
        "restarted",
        f"process {replicator.pid} was gone ({why}); new pid {restarted.pid}, "
        f"restart {len(recent) + 1} of {RESTARTS_PER_HOUR} in the last hour",
    )


def _action(flow: str, action: str, reason: str) -> dict[str, Any]:
    return {"flow": flow, "action": action, "reason": reason}


def _history_file(flow: str) -> Path:
    return subdir("health") / f"{flow}.restarts.json"


def _read_history(path: Path) -> list[float]:
    try:
        return [float(t) for t in json.loads(path.read_text(encoding="utf-8"))]
    except FileNotFoundError:
        return []
