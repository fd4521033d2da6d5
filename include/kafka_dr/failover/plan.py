"""A failover's plan, made once by validation and read by every later step, and what those steps returned, which
the report is made of. Both travel between Airflow tasks as plain dicts (XCom): `to_dict` / `from_dict`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..plans import choice, fields_of, required
from ..topology import Topology
from ..translation.offsets import parse_reset_time

MODES = ("planned", "disaster")


@dataclass(frozen=True)
class FailoverPlan:
    """Move clients, group offsets and the registry from `failed` to `target`. `flows` replicate failed -> target
    (their offsets are translated, their lag drained when planned); `stop_flows` are every flow from or into
    `failed`, stopped. `home`: only the aliases at home in that cluster move (a failback's switch back moves back
    only the restored cluster's own). `step`: when the task that made the plan ran (`timed`), for the report."""

    topology: str
    failed: str
    target: str
    mode: str
    groups: str
    flows: tuple[str, ...]
    stop_flows: tuple[str, ...]
    reset_to_datetime: str | None = None
    home: str | None = None
    step: Mapping[str, Any] | None = None
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

    def lag_gates(self) -> list[dict[str, str]]:
        """Kwargs of the lag gates (planned): one per flow failed -> target."""
        return [{"flow": name, "topology": self.topology} for name in self.flows]

    def translations(self, unseen_from: Mapping[str, Mapping[str, int]] | None = None) -> list[dict[str, Any]]:
        """Kwargs of the offset translations, one per flow failed -> target: from the checkpoints kept in the target
        in a disaster; with `unseen_from` (flow -> the target's {"topic:partition": offset} from which records were
        never seen by the source's groups), each flow's entry of it."""
        kwargs = [
            {
                "flow": name,
                "topology": self.topology,
                "groups": self.groups,
                "from_checkpoints": self.mode == "disaster",
                "reset_to_datetime": self.reset_to_datetime,
            }
            for name in self.flows
        ]
        if unseen_from is not None:
            kwargs = [{**one, "unseen_from": dict(unseen_from[one["flow"]])} for one in kwargs]
        return kwargs

    def to_dict(self) -> dict[str, Any]:
        data = {
            "topology": self.topology,
            "failed": self.failed,
            "target": self.target,
            "mode": self.mode,
            "groups": self.groups,
            "flows": list(self.flows),
            "stop_flows": list(self.stop_flows),
            "reset_to_datetime": self.reset_to_datetime,
            "home": self.home,
            "dry_run": self.dry_run,
        }
        return data if self.step is None else {**data, "step": dict(self.step)}

    @classmethod
    def from_dict(cls, data: Any) -> FailoverPlan:
        """The plan `to_dict` made (with the "step" `timed` adds); ValueError naming what is missing."""
        data = fields_of(data, "failover plan", "topology", "failed", "target", "mode", "groups", "flows", "stop_flows")
        return cls(
            data["topology"],
            data["failed"],
            data["target"],
            data["mode"],
            data["groups"],
            tuple(data["flows"]),
            tuple(data["stop_flows"]),
            data.get("reset_to_datetime"),
            data.get("home"),
            data.get("step"),
            bool(data.get("dry_run", False)),
        )


@dataclass(frozen=True)
class FailoverRun:
    """What a failover's steps after validation returned, for its report: each is a task's result with the "step"
    ({"started", "ended"}) that `timed` adds; None for a step that did not run. `translations` are the per-flow
    translation summaries (translate_offsets' JSON)."""

    stop_replication: Mapping[str, Any] | None = None
    translations: Sequence[Mapping[str, Any]] = field(default_factory=tuple)
    schema_registry: Mapping[str, Any] | None = None
    switch_consumers: Mapping[str, Any] | None = None
    verify: Mapping[str, Any] | None = None
    approval: Mapping[str, Any] | None = None  # the approve task's answer; None when none was asked

    def steps(self) -> dict[str, Mapping[str, Any]]:
        """The steps that recorded their timing, by name, in the order they run; the translations apart."""
        steps = {
            "approve": self.approval,  # asked to answered: the wait for a person
            "stop_replication": self.stop_replication,
            "schema_registry": self.schema_registry,
            "switch_consumers": self.switch_consumers,
            "verify": self.verify,
        }
        return {name: result["step"] for name, result in steps.items() if result is not None and "step" in result}
