"""A failback's plan, made once by validation, the switch back it prepares (a planned failover in reverse plus the
resync), and what its steps returned, which the report is made of. They travel between Airflow tasks as plain dicts
(XCom): `to_dict` / `from_dict`."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..failover.plan import FailoverPlan
from ..plans import choice, fields_of, required
from ..topology import Topology

MODES = ("data_kept", "data_lost")
ACTIONS = ("report", "republish", "discard")


@dataclass(frozen=True)
class FailbackPlan:
    """Bring `restored` back after a failover to `serving`. `mode`: data_kept (it came back with its data) or
    data_lost; `unreplicated`: what happens to the records that never left it (ACTIONS); `flows_out` replicate
    restored -> serving, `flows_back` serving -> restored. `step`: when validation ran (`timed`), for the report."""

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
    step: Mapping[str, Any] | None = None

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

    def resume_kwargs(self, topo: Topology) -> list[dict[str, str]]:
        """Kwargs of the continuous replicators resumed at the end: every flow of the topology."""
        return [{"flow": f.name, "topology": self.topology} for f in topo.flows]

    def to_dict(self) -> dict[str, Any]:
        data = {
            "topology": self.topology,
            "restored": self.restored,
            "restored_cluster_id": self.restored_cluster_id,
            "serving": self.serving,
            "mode": self.mode,
            "unreplicated": self.unreplicated,
            "groups": self.groups,
            "dry_run": self.dry_run,
            "flows_out": list(self.flows_out),
            "flows_back": list(self.flows_back),
        }
        return data if self.step is None else {**data, "step": dict(self.step)}

    @classmethod
    def from_dict(cls, data: Any) -> FailbackPlan:
        """The plan `to_dict` made (with the "step" `timed` adds); ValueError naming what is missing."""
        data = fields_of(
            data,
            "failback plan",
            "topology",
            "restored",
            "restored_cluster_id",
            "serving",
            "mode",
            "unreplicated",
            "groups",
            "dry_run",
            "flows_out",
            "flows_back",
        )
        return cls(
            data["topology"],
            data["restored"],
            data["restored_cluster_id"],
            data["serving"],
            data["mode"],
            data["unreplicated"],
            data["groups"],
            data["dry_run"],
            tuple(data["flows_out"]),
            tuple(data["flows_back"]),
            data.get("step"),
        )


@dataclass(frozen=True)
class SwitchBack:
    """The switch back: `failover`, a planned failover from the serving cluster to the restored one moving only the
    aliases at home there, over the flows that resync (the flows back and `inverse_flows`, the inverses of flows out
    made for the serving topics no flow back covers, in a derived topology file). `force`: data_lost's override of
    the cycle rule ({"cluster": id regex, "to": ISO time}), else None. `step`: when it was prepared (`timed`)."""

    failover: FailoverPlan
    inverse_flows: tuple[str, ...]
    force: Mapping[str, str] | None
    step: Mapping[str, Any] | None = None

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

    def resync_kwargs(self) -> list[dict[str, Any]]:
        """Kwargs of the bounded resync runs: one per flow into the restored cluster, with the override."""
        return [{**one, "force": self.force} for one in self.failover.lag_gates()]

    def verify_kwargs(
        self, flows: Iterable[str], ranges: Sequence[Mapping[str, Any]], settle: float
    ) -> list[dict[str, Any]]:
        """Kwargs of the verify jobs over `flows` (every flow of the derived topology): the flows out skip the
        unreplicated `ranges` handled (republished copies stand for them, or they stay unread); the resync flows
        carry the override they were copied with."""
        return [
            {
                "flow": name,
                "topology": self.topology,
                "skip": [
                    f"{r['topic']}:{r['partition']}:{r['from_offset']}-{r['to_offset']}"
                    for r in ranges
                    if r["flow"] == name
                ],
                "settle": settle,
                "force": self.force if name in self.flows else None,
            }
            for name in flows
        ]

    def to_dict(self) -> dict[str, Any]:
        data = {
            "failover": self.failover.to_dict(),
            "inverse_flows": list(self.inverse_flows),
            "force": None if self.force is None else dict(self.force),
        }
        return data if self.step is None else {**data, "step": dict(self.step)}

    @classmethod
    def from_dict(cls, data: Any) -> SwitchBack:
        """The switch back `to_dict` made (with the "step" `timed` adds); ValueError naming what is missing."""
        data = fields_of(data, "switch back", "failover", "inverse_flows", "force")
        return cls(
            FailoverPlan.from_dict(data["failover"]), tuple(data["inverse_flows"]), data["force"], data.get("step")
        )


@dataclass(frozen=True)
class FailbackRun:
    """What a failback's steps after validation returned, for its report: each a task's result with the "step"
    ({"started", "ended"}) that `timed` adds; None for a step that did not run (yet). `resync_records`: data records
    the resync runs copied."""

    measure_unreplicated: Mapping[str, Any] | None = None
    approval: Mapping[str, Any] | None = None  # the approve task's answer; None when none was asked
    prepare_switch_back: SwitchBack | None = None
    resync_records: int | None = None
    switch_producers: Mapping[str, Any] | None = None
    handle_unreplicated: Mapping[str, Any] | None = None
    registry_back: Mapping[str, Any] | None = None
    switch_consumers: Mapping[str, Any] | None = None
    verify: Mapping[str, Any] | None = None

    def steps(self) -> dict[str, Mapping[str, Any]]:
        """The steps that recorded their timing, by name, in the order they run."""
        back = self.prepare_switch_back
        steps = {
            "measure_unreplicated": (self.measure_unreplicated or {}).get("step"),
            "approve": (self.approval or {}).get("step"),  # asked to answered: the wait for a person
            "prepare_switch_back": None if back is None else back.step,
            "switch_producers": (self.switch_producers or {}).get("step"),
            "handle_unreplicated": (self.handle_unreplicated or {}).get("step"),
            "registry_back": (self.registry_back or {}).get("step"),
            "switch_consumers": (self.switch_consumers or {}).get("step"),
            "verify": (self.verify or {}).get("step"),
        }
        return {name: step for name, step in steps.items() if step is not None}
