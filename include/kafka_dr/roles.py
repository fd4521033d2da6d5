"""Which DC serves after a failover: one record, STATE_DIR/roles.json, that dr_failover writes once its clients have
moved and dr_failback clears once they are back. The DR page, `kafka-dr status`, the metrics and the health runs read
it. While a failback is pending, the health runs fold their alerts about the cluster failed over from into one
`failed_over` alert (alerts.py) that repeats at `alerts.repeat_after`, instead of one per flow and cluster.

One entry per cluster failed over from, so that a second failover of another cluster is kept beside the first.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass

from .paths import state_dir
from .state import locked, now_iso, write_json
from .topology import Topology

FILE = "roles.json"


@dataclass(frozen=True)
class FailedOver:
    """`away`'s clients were moved to `serving` by the dr_failover run `run_id` (started `started_at`, clients moved by
    `switched_at`); `mode` disaster means `away` was lost."""

    away: str
    serving: str
    mode: str
    run_id: str
    started_at: str
    switched_at: str

    def line(self) -> str:
        how = "lost" if self.mode == "disaster" else "left by a planned failover"
        return (
            f"{self.away} {how} (dr_failover run {self.run_id}, started {self.started_at}); {self.serving} serves "
            f"since {self.switched_at}; failback pending"
        )


def pending() -> dict[str, FailedOver]:
    """Every failover whose failback has not run, by the cluster failed over from (empty when the file is unreadable:
    a bad file must not hide what the health runs report)."""
    try:
        raw = json.loads((state_dir() / FILE).read_text(encoding="utf-8"))
        return {away: FailedOver(**entry) for away, entry in raw.items()}
    except (OSError, ValueError, TypeError):
        return {}


def failed_over(away: str, serving: str, mode: str, run_id: str, started_at: str) -> FailedOver:
    """Record a failover whose clients have moved; returns the entry."""
    entry = FailedOver(away, serving, mode, run_id, started_at, now_iso())
    _change(lambda roles: roles | {away: entry})
    return entry


def failed_back(restored: str) -> FailedOver | None:
    """Clear the failover of `restored` once its clients are back; returns the entry cleared (None: none pending)."""
    before = _change(lambda roles: {away: e for away, e in roles.items() if away != restored})
    return before.get(restored)


def accepted(run_id: str) -> list[FailedOver]:
    """Clear the failovers that the dr_failover run `run_id` made, the state they left being accepted as the new normal
    (`kafka-dr drill resolve --accept` after a drill stopped between its failover and failback); returns them."""
    before = _change(lambda roles: {away: e for away, e in roles.items() if e.run_id != run_id})
    return [entry for entry in before.values() if entry.run_id == run_id]


def away_flows(topology: Topology, away: Collection[str]) -> set[str]:
    """The flows from or into a cluster of `away` (the clusters failed over from, or pending()'s keys): their errors
    are the failover's, not news."""
    return {flow.name for flow in topology.flows if flow.source in away or flow.target in away}


def _change(update: Callable[[dict[str, FailedOver]], dict[str, FailedOver]]) -> dict[str, FailedOver]:
    """Read, update and write the record under its lock; returns what it held before."""
    path = state_dir() / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with locked(path):
        before = pending()
        write_json(path, {away: asdict(entry) for away, entry in sorted(update(before).items())})
    return before
