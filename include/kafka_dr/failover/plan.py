"""A failover's plan, made once by validation and read by every later step; it travels between Airflow tasks as
plain JSON (XCom) through kafka_dr.codec."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..params import choice, required
from ..reports import Step
from ..topology import Topology
from ..translation.offsets import parse_reset_time

MODES = ("planned", "disaster")


@dataclass(frozen=True)
class FailoverPlan:
    """Move clients, group offsets and the registry from `failed` to `target`. `flows` replicate failed -> target
    (their offsets are translated, their lag drained when planned); `stop_flows` are every flow from or into
    `failed`, stopped. `home`: only the aliases at home in that cluster move (a failback's switch back moves back
    only the restored cluster's own). `step`: when the task that made the plan ran, for the report."""

    topology: str
    failed: str
    target: str
    mode: str
    groups: str
    flows: tuple[str, ...]
    stop_flows: tuple[str, ...]
    reset_to_datetime: str | None = None
    home: str | None = None
    step: Step | None = None
    dry_run: bool = False

    @classmethod
    def build(
        cls,
        topo: Topology,
        topology_file: str,
        failed: Any,
        target: Any,
        mode: str,
        groups: str,
        reset_to_datetime: str | None = None,
        dry_run: Any = False,
    ) -> FailoverPlan:
        """The plan of a failover of `topo` from `failed` to `target`; TopologyError or ValueError with one line
        when a cluster is unknown, both are one, the mode or reset time is bad or no flow replicates failed into
        target."""
        required(failed_cluster=failed, target_cluster=target, mode=mode)
        topo.cluster(str(failed))
        topo.cluster(str(target))
        if failed == target:
            raise ValueError(f"params failed_cluster and target_cluster are both {failed!r}")
        choice("mode", mode, MODES)
        if reset_to_datetime is not None:
            parse_reset_time(reset_to_datetime)
        if not isinstance(dry_run, bool):
            raise ValueError(f"param dry_run: must be true or false, got {dry_run!r}")
        flows = tuple(f.name for f in topo.flows if f.source == failed and f.target == target)
        if not flows:
            raise ValueError(f"no flow replicates {failed} into {target}: there is nothing to fail over to")
        stopped = tuple(f.name for f in topo.flows if failed in (f.source, f.target))
        return cls(topology_file, failed, target, mode, groups, flows, stopped, reset_to_datetime, dry_run=dry_run)

    @property
    def from_checkpoints(self) -> bool:
        """A disaster's offsets come from the checkpoints kept in the target (its source is lost); a planned
        failover's are translated from the source's committed offsets."""
        return self.mode == "disaster"
