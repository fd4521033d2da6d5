"""A failover's preview: what the run would do, computed from the clusters as they are now, changing nothing
(docs/design.md "Safety of the red button"). The `preview` task makes it right after validation; a dry run ends
with it as its report, the approval shows its Markdown, and every failover report keeps it under `preview`."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from ..access import ClusterAccess
from ..clients import error_text
from ..replication import liveness
from ..reports import Step
from ..schema_redirect.steps import take_over_skipped
from ..topology import Topology
from ..translation.checkpoints import checkpointed_groups, translate_from_source
from ..translation.offsets import Translated, offsets_at_time, parse_reset_time
from .plan import FailoverPlan
from .rpo import behind, lag_readings, rpo
from .switch import EVERY_ROLE, PRODUCERS, clients_to_move

SAMPLE_GROUPS = 5  # groups shown with their offsets on the page (all of them are in the JSON)
LIVENESS_WINDOW_S = 3.0  # how long a replicator elsewhere has to show its claim in its target


@dataclass(frozen=True)
class Preview:
    """What a failover would do (the report's `preview`, docs/design.md "Reports"): the RPO estimate (`rpo`'s
    fields), per flow its lag now ({"records", "exact"}, None when unknown) and what its replicator does, the groups'
    offsets ({"count", "partitions", "sample", "origin", "checkpoint_at_ms", "offsets"}), the registry's move
    ({"leader", "follower"} or {"skipped"}) and the aliases moved ({"producers_first", "moved"}). `step`: when the
    preview task ran."""

    failed_cluster: str
    target_cluster: str
    mode: str
    dry_run: bool
    rpo_estimate: dict[str, Any]
    lag: dict[str, dict[str, Any] | None]
    replicators: dict[str, str]
    groups: dict[str, Any]
    schema_registry: dict[str, str]
    clients: dict[str, list[str]]
    step: Step | None = None


def preview_failover(plan: FailoverPlan, access: ClusterAccess) -> Preview:
    """The preview of `plan`: per flow the lag now and the RPO estimate, the replicators that stop, each group's
    offsets to be applied, the registry and client-alias moves. Raises ValueError with one line when the offsets
    cannot be read (a disaster's target, a planned failover's source)."""
    topo = access.topology
    # A disaster's failed cluster is declared lost: its last lag snapshot, not LAG_TIMEOUT_S of waiting for it.
    readings = lag_readings(access, plan.flows, measure=plan.mode == "planned")
    estimate = rpo(readings)
    producers = clients_to_move(topo, plan, PRODUCERS) if plan.mode == "planned" else []
    return Preview(
        failed_cluster=plan.failed,
        target_cluster=plan.target,
        mode=plan.mode,
        dry_run=plan.dry_run,
        # planned: producers move first and the lag drains to 0 before consumers move
        rpo_estimate={**estimate, "records": 0 if plan.mode == "planned" else estimate["records"]},
        lag={
            name: None if r.lag is None else {"records": sum(behind(r.lag).values()), "exact": r.exact}
            for name, r in readings.items()
        },
        replicators=_replicators(plan, access),
        groups=_groups(plan, access),
        schema_registry=_registry(topo, plan),
        clients={
            "producers_first": producers,
            "moved": [a for a in clients_to_move(topo, plan, EVERY_ROLE) if a not in producers],
        },
    )


def _replicators(plan: FailoverPlan, access: ClusterAccess) -> dict[str, str]:
    """Per flow to stop, whether its replicator runs now (as its target sees it), side by side."""
    topo = access.topology

    def one(flow: str) -> str:
        target = topo.flow(flow).target
        if plan.mode == "disaster" and target == plan.failed:
            return f"stop requested through its source {topo.flow(flow).source} (its target {target} is lost)"
        try:
            state = liveness.liveness(flow, access.config(target), LIVENESS_WINDOW_S)
        except KafkaException as exc:
            return f"unknown: its target {target} does not answer ({error_text(exc)})"
        return f"stops: {state.detail}" if state.running else f"not running: {state.detail}"

    with ThreadPoolExecutor(max_workers=max(1, len(plan.stop_flows))) as pool:
        states = {flow: pool.submit(one, flow) for flow in plan.stop_flows}
    return {flow: future.result() for flow, future in states.items()}


def _groups(plan: FailoverPlan, access: ClusterAccess) -> dict[str, Any]:
    """The offsets each flow's groups would get in the target: the checkpoints kept there in a disaster, the source's
    committed offsets translated now when planned (the run translates again once the lag is 0), or those of
    `reset_to_datetime`."""
    pattern = re.compile(plan.groups) if plan.groups else None
    offsets: dict[str, dict[str, list[dict[str, Any]]]] = {}
    checkpoint_at: dict[str, int | None] = {}
    for name in plan.flows:
        flow = access.topology.flow(name)
        try:
            if plan.mode == "disaster":
                groups, checkpoint_at[name] = checkpointed_groups(access, flow, pattern)
            else:
                groups = translate_from_source(access, flow, pattern, retries=1)
            if plan.reset_to_datetime is not None:
                target_config = access.config(flow.target)
                reset_ms = parse_reset_time(plan.reset_to_datetime)
                groups = offsets_at_time(target_config, AdminClient(target_config), groups, reset_ms)
        except KafkaException as exc:
            side = flow.target if plan.mode == "disaster" else flow.source
            raise ValueError(f"flow {name}: group offsets not read from {side}: {error_text(exc)}") from None
        offsets[name] = {group: [_offset(t) for t in ts] for group, ts in sorted(groups.items())}
    names = sorted({g for groups in offsets.values() for g in groups})
    return {
        "count": len(names),
        "partitions": sum(len(ts) for groups in offsets.values() for ts in groups.values()),
        "sample": names[:SAMPLE_GROUPS],
        "origin": "reset_to_datetime"
        if plan.reset_to_datetime
        else ("checkpoints" if plan.mode == "disaster" else "source"),
        "checkpoint_at_ms": checkpoint_at,
        "offsets": offsets,
    }


def _offset(translated: Translated) -> dict[str, Any]:
    return {"topic": translated.dest_topic, "partition": translated.partition, "offset": translated.dest_offset}


def _registry(topo: Topology, plan: FailoverPlan) -> dict[str, str]:
    skipped = take_over_skipped(topo, plan.failed, plan.target)
    if skipped is not None:
        return {"skipped": skipped}
    return {"leader": plan.target, "follower": plan.failed}


def preview_page(preview: Preview) -> str:
    """The preview in Markdown: the approval's body, and the page of a dry run."""
    estimate = preview.rpo_estimate
    records = "unknown" if estimate["records"] is None else f"{estimate['records']} records"
    kind = "exact" if estimate["exact"] else "estimate"
    if preview.mode == "planned":
        kind = "producers move first, then the lag drains to 0"
    groups = preview.groups
    registry = preview.schema_registry
    clients = preview.clients
    lines = [
        f"# Failover {preview.failed_cluster} -> {preview.target_cluster} ({preview.mode})"
        + (": dry run" if preview.dry_run else ""),
        "",
        f"- **RPO: {records}** ({kind})",
        *(
            f"  - flow {flow}: lag "
            + ("unknown" if lag is None else f"{lag['records']} records ({'now' if lag['exact'] else 'snapshot'})")
            for flow, lag in preview.lag.items()
        ),
        "- replicators:",
        *(f"  - {flow}: {state}" for flow, state in preview.replicators.items()),
        f"- groups: {groups['count']} ({groups['partitions']} partitions, offsets from {groups['origin']})",
        *(
            f"  - {group} in {flow}: "
            + ", ".join(f"{o['topic']}[{o['partition']}]@{o['offset']}" for o in offsets[group])
            for flow, offsets in groups["offsets"].items()
            for group in groups["sample"]
            if group in offsets
        ),
        "- schema registry: "
        + (
            f"unchanged ({registry['skipped']})"
            if "skipped" in registry
            else f"{registry['leader']}'s becomes the leader, {registry['follower']}'s follows when it answers"
        ),
        f"- producers first: {', '.join(clients['producers_first']) or 'none'}",
        f"- clients moved: {', '.join(clients['moved']) or 'none'}",
    ]
    return "\n".join(lines) + "\n"
