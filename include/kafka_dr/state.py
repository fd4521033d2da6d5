"""kafka-dr's run state on disk: tracked replicators, active clusters of client aliases, reports.

Everything lives under $KDR_STATE_DIR, else <project>/.kafka-dr (`paths.state_dir`). Writes are atomic
(write, then rename) and callers that read-modify-write hold an exclusive lock, so parallel tasks and DAG
runs never see half a file; both come from `processes`, which records the background processes the same way.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from .paths import state_dir
from .processes import locked as locked  # re-exported: the state's writers take both from here
from .processes import write_json as write_json


def subdir(name: str) -> Path:
    path = state_dir() / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def safe_name(run_id: str) -> str:
    """A run id made safe as a file name (Airflow's run ids hold ':' and '+')."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", run_id)


def report_path(dag_id: str, run_id: str, suffix: str = ".json") -> Path:
    """STATE_DIR/reports/<dag>-<run><suffix>, with the run id made safe as a file name."""
    return subdir("reports") / f"{dag_id}-{safe_name(run_id)}{suffix}"


def now_iso(timespec: str = "seconds") -> str:
    return datetime.now(UTC).isoformat(timespec=timespec)
