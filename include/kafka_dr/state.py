"""kafka-dr's run state on disk: tracked replicators, active clusters of client aliases, reports.

Everything lives under $KDR_STATE_DIR, else <project>/.kafka-dr. Writes are atomic (write, then
rename) and callers that read-modify-write hold an exclusive lock, so parallel tasks and DAG runs
never see half a file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .topology import DEFAULT_TOPOLOGY

STATE_DIR_ENV = "KDR_STATE_DIR"


def state_dir() -> Path:
    """Root of kafka-dr's run state: $KDR_STATE_DIR, else <project>/.kafka-dr."""
    return Path(os.environ.get(STATE_DIR_ENV) or DEFAULT_TOPOLOGY.parent.parent / ".kafka-dr").absolute()


def subdir(name: str) -> Path:
    path = state_dir() / name
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Exclusive across processes for as long as the block runs (a `.lock` file beside `path`)."""
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def report_path(dag_id: str, run_id: str, suffix: str = ".json") -> Path:
    """STATE_DIR/reports/<dag>-<run><suffix>, with the run id made safe as a file name."""
    return subdir("reports") / f"{dag_id}-{re.sub(r'[^A-Za-z0-9._-]', '_', run_id)}{suffix}"


def now_iso(timespec: str = "seconds") -> str:
    return datetime.now(UTC).isoformat(timespec=timespec)
