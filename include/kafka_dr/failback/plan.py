"""A failback's plan, made once by validation, and the switch back it prepares (a planned failover in reverse plus the
resync). They travel between Airflow tasks as plain JSON (XCom) through kafka_dr.codec."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..failover.plan import FailoverPlan
from ..params import choice, required
from ..reports import Step
from ..topology import Topology

MODES = ("data_kept", "data_lost")
ACTIONS = ("report", "republish", "discard")


@dataclass(frozen=True)
class FailbackPlan:
    """Bring `restored` back after a failover to `serving`. `mode`: data_kept (it came back with its data) or
    data_lost; `unreplicated`: what happens to the records that never left it (ACTIONS); `flows_out` replicate
    restored -> serving, `flows_back` serving -> restored. `step`: when validation ran, for the report."""

    topology: str
    restored: str
    restored_cluster_id: str
    serving: str
    mode: str
    unreplicated: str
    groups: str
    dry_run: bool
    flows_out: tuple[str, ...]
    flows_back: tuple[str, ...]
    step: Step | None = None

    @staticmethod
    def check(topo: Topology, restored: Any, serving: Any, mode: Any, unreplicated: Any) -> None:
        """TopologyError or ValueError with one line when a cluster is unknown, both are one, the mode or action is
        not one of MODES / ACTIONS, or no flow links the two clusters either way."""
        required(restored_cluster=restored, serving_cluster=serving, mode=mode)
        topo.cluster(str(restored))
        topo.cluster(str(serving))
        if restored == serving:
            raise ValueError(f"params restored_cluster and serving_cluster are both {restored!r}")
        choice("mode", mode, MODES)
        choice("unreplicated", unreplicated, ACTIONS)
        if not any({f.source, f.target} == {restored, serving} for f in topo.flows):
            raise ValueError(f"no flow between {restored} and {serving} either way: there is nothing to fail back")

    @classmethod
    def build(
        cls,
        topo: Topology,
        topology_file: str,
        restored: str,
        restored_cluster_id: str,
        serving: str,
        mode: str,
        unreplicated: str,
        groups: str,
        dry_run: bool,
    ) -> FailbackPlan:
        """The plan of params that passed `check`; `restored_cluster_id` as the restored cluster answers now."""
        return cls(
            topology_file,
            restored,
            restored_cluster_id,
            serving,
            mode,
            unreplicated,
            groups,
            dry_run,
            tuple(f.name for f in topo.flows if f.source == restored and f.target == serving),
            tuple(f.name for f in topo.flows if f.source == serving and f.target == restored),
        )

    def stop_line(self, unreplicated: Mapping[str, Any], report_file: str) -> str | None:
        """The line the run stops with, nothing changed, when records never left the restored cluster and the action
        is `report` (a dry run stops too, but succeeds); None when the failback goes on."""
        count = unreplicated.get("records")
        if self.unreplicated != "report" or not count or self.dry_run:
            return None
        topics = ", ".join(f"{topic} {n}" for topic, n in unreplicated["per_topic"].items())
        return (
            f"{count} records never left {self.restored} ({topics}; ranges in {report_file}); nothing changed: run "
            f"again with unreplicated=republish to have the moved groups read them once, or discard to leave them "
            f"unread"
        )


@dataclass(frozen=True)
class SwitchBack:
    """The switch back: `failover`, a planned failover from the serving cluster to the restored one moving only the
    aliases at home there, over the flows that resync (the flows back and `inverse_flows`, the inverses of flows out
    made for the serving topics no flow back covers, in a derived topology file). `force`: data_lost's override of
    the cycle rule ({"cluster": id regex, "to": ISO time}), else None. `step`: when it was prepared."""

    failover: FailoverPlan
    inverse_flows: tuple[str, ...]
    force: Mapping[str, str] | None
    step: Step | None = None

    @classmethod
    def build(
        cls,
        plan: FailbackPlan,
        topology_file: str,
        flows: Sequence[str],
        inverse_flows: Sequence[str],
        run_started: datetime,
    ) -> SwitchBack:
        """The switch back of `plan` over the resync `flows` of `topology_file` (kafka_dr.failback.resync). data_lost
        forces the copy of the records that first came from the restored cluster, up to the run's start (the
        filter override of docs/design.md), which the cycle rule refuses when the cluster came back with its old id."""
        failover = FailoverPlan(
            topology=topology_file,
            failed=plan.serving,
            target=plan.restored,
            mode="planned",
            groups=plan.groups,
            flows=tuple(flows),
            stop_flows=(),
            home=plan.restored,
        )
        force = None
        if plan.mode == "data_lost":
            force = {"cluster": re.escape(plan.restored_cluster_id), "to": run_started.isoformat()}
        return cls(failover, tuple(inverse_flows), force)

    @property
    def topology(self) -> str:
        return self.failover.topology

    @property
    def flows(self) -> tuple[str, ...]:
        """The flows serving -> restored that resync."""
        return self.failover.flows

    def force_of(self, flow: str) -> Mapping[str, str] | None:
        """The override `flow` was copied with: the resync flows carry data_lost's, the others none."""
        return self.force if flow in self.flows else None
