"""A drill run as its steps share it: the plan, the topology file it was checked against, and the run's folder
(STATE_DIR/drill-runs/<run>), where the probe's files, the cut-off's mark and the steps' failures are kept for the
later steps, which may run in other processes or on other hosts."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..reports import Step
from ..state import safe_name, subdir
from ..topology import Topology
from .cutoff import check_commands
from .plan import DrillPlan, plan_drill

CUT_MARK = "cut_off_tried"  # in the run's folder: the cut was tried, so the way back must run
AT_CUT = "acknowledged_at_cut.json"  # the probe records acknowledged when the DC was cut off
FAILURES = "failures.txt"
PROBE = "probe"  # the probe process's folder (probe_process.py)


def run_folder(run_id: str) -> Path:
    return subdir("drill-runs") / safe_name(run_id)


@dataclass(frozen=True)
class DrillRun:
    """A checked drill: its plan, the topology file (with its sha256, for the evidence) and the run's folder; from
    task to task through kafka_dr.codec (the report reads it even when later steps failed)."""

    drill: DrillPlan
    topology: str
    topology_sha256: str
    folder: Path
    step: Step | None = None  # when validate_drill checked it

    @classmethod
    def check(cls, topology: Topology, topology_file: Path, params: Mapping[str, Any], run_id: str) -> DrillRun:
        """Every param against the topology and (disaster) that the DC can be cut off here; DrillError with one line."""
        drill = plan_drill(topology, dict(params))
        if drill.disaster:
            check_commands(topology, drill.from_cluster)
        digest = hashlib.sha256(topology_file.read_bytes()).hexdigest()
        return cls(drill, str(topology_file), digest, run_folder(run_id))

    @property
    def probe(self) -> Path:
        return self.folder / PROBE

    def record_failure(self, step: str, message: str) -> None:
        """Keep a step's failure line: the evidence names the first one rather than the checks it made fail after
        it (an inner run never triggered, a probe never stopped)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / FAILURES, "a", encoding="utf-8") as failures:
            failures.write(f"{step}: {message}\n")

    def first_failure(self) -> str | None:
        path = self.folder / FAILURES
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        return lines[0] if lines else None

    def mark_cut(self) -> None:
        (self.folder / CUT_MARK).touch()

    def cut_tried(self) -> bool:
        return (self.folder / CUT_MARK).exists()
