"""Each flow's latest health evaluation as kept on this host, STATE_DIR/health/<flow>.json: written by every health
run (health.check.save_evaluation, even when the flow's target is down), read by the metrics, the Kafka DR page and
`kafka-dr replicators list`."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from ..paths import state_dir
from ..times import iso_from_ms

log = logging.getLogger(__name__)

# `kafka-dr replicators list` repeats a STALLED verdict of a health run this recent (the scheduled runs come every 5
# minutes): an older one may no longer hold.
STALLED_FRESH_S = 900.0


def snapshot_dir() -> Path:
    return state_dir() / "health"


def snapshot_path(flow: str) -> Path:
    return snapshot_dir() / f"{flow}.json"


def load_snapshots(flows: list[str] | None) -> dict[str, dict[str, Any]]:
    """The latest evaluation of each flow named (every one kept, when None); unreadable files are left out with a
    warning: a half-written file cannot occur (writes rename), a corrupt one must not fail the scrape."""
    paths = [snapshot_path(flow) for flow in flows] if flows is not None else sorted(snapshot_dir().glob("*.json"))
    snapshots = {}
    for path in paths:
        try:
            snapshot = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as exc:
            log.warning("health: %s unreadable: %s", path, exc)
            continue
        if isinstance(snapshot, dict) and isinstance(snapshot.get("status"), str):
            snapshots[path.stem] = snapshot
    return snapshots


def stalled_line(flow: str, now_ms: int, fresh_s: float = STALLED_FRESH_S) -> str | None:
    """ "STALLED for Ns at the last health run (TIME)" when the flow's latest evaluation kept here (at most `fresh_s`
    old) found its replicator running without copying what waits; None otherwise, or when it cannot be read."""
    snapshot = load_snapshots([flow]).get(flow, {})
    stalled, at_ms = snapshot.get("stalled_seconds"), snapshot.get("at_ms")
    if not stalled or not isinstance(at_ms, int) or now_ms - at_ms > fresh_s * 1000:
        return None
    return f"STALLED for {stalled:.0f}s at the last health run ({iso_from_ms(at_ms)})"
