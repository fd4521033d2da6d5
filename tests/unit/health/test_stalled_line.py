"""`kafka-dr replicators list` repeats a recent health run's STALLED verdict (health.snapshots.stalled_line)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_dr.health.check import save_evaluation
from kafka_dr.health.rules import FlowHealth, PartitionStatus
from kafka_dr.health.snapshots import STALLED_FRESH_S, stalled_line

AT_MS = 1_700_000_000_000


@pytest.fixture(autouse=True)
def state(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))


def evaluated(stalled: float | None) -> None:
    partition = PartitionStatus("orders", 0, "STOP", 52, 300.0, "no progress for 300s (52 records waiting)")
    save_evaluation(None, FlowHealth("out", "ERR", ("...",), (partition,), stalled), AT_MS, [])


def test_a_recent_stalled_evaluation_is_one_line_with_since_when() -> None:
    evaluated(300.0)
    line = stalled_line("out", AT_MS + 60_000)
    assert line == "STALLED for 300s at the last health run (2023-11-14T22:13:20+00:00)"


def test_nothing_when_not_stalled_too_old_or_never_evaluated() -> None:
    assert stalled_line("out", AT_MS) is None  # never evaluated
    evaluated(None)
    assert stalled_line("out", AT_MS) is None
    evaluated(300.0)
    assert stalled_line("out", AT_MS + int(STALLED_FRESH_S * 1000) + 1) is None
