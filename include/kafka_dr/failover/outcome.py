"""A failover's outcome, checked in the clusters themselves whatever the tracker says (dr_failover's verify step):
applied groups hold their translated offsets in the target, no client is left on the failed cluster, and no flow
from or into it still copies. ("Verify" alone is the record-by-record check of a flow: replication/verify.py.)"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException

from ..access import ClusterAccess
from ..clients import error_text, list_group_offsets
from ..replication import activity
from ..reports import Step
from ..topology import Topology
from ..translation.summary import applied_offsets
from .plan import FailoverPlan
from .switch import clients_left


@dataclass(frozen=True)
class FailoverOutcome:
    """`problems`: one line each, none when the failover holds; `groups_checked`; `replication`: what was seen of
    each stopped flow in its target. `step`: when the verify task ran."""

    problems: tuple[str, ...]
    groups_checked: int
    replication: dict[str, str]
    step: Step | None = None


def stopped_flows_by_target(topo: Topology, plan: FailoverPlan) -> dict[str, list[str]]:
    """The stopped flows, by the cluster they copied into."""
    by_target: dict[str, list[str]] = {}
    for name in plan.stop_flows:
        by_target.setdefault(topo.flow(name).target, []).append(name)
    return by_target


def check_failover(
    access: ClusterAccess, plan: FailoverPlan, translations: Sequence[Mapping[str, Any]]
) -> FailoverOutcome:
    """Groups and clients checked while each stopped flow's target is watched for progress (the watch window passes
    meanwhile)."""
    by_target = stopped_flows_by_target(access.topology, plan)
    window = activity.WINDOW_S
    with ThreadPoolExecutor(max_workers=max(1, len(by_target))) as pool:
        watching = {
            target: pool.submit(activity.watch, access.config(target), flows, window)
            for target, flows in by_target.items()
        }
        problems, checked = check_groups_and_clients(access, plan, translations, plan.target)
        copying, replication = still_copying(by_target, watching, window)
    return FailoverOutcome((*problems, *copying), checked, replication)


def still_copying(
    by_target: Mapping[str, list[str]],
    watching: Mapping[str, Future[dict[str, activity.Activity]]],
    window: float,
) -> tuple[list[str], dict[str, str]]:
    """A line per stopped flow that still appended progress in its target during the watch `window` (in seconds),
    and what was seen of each flow; a target that does not answer cannot be written to either."""
    problems, seen = [], {}
    for target, future in watching.items():
        try:
            activities = future.result()
        except (KafkaException, TimeoutError, RuntimeError) as exc:
            seen.update(dict.fromkeys(by_target[target], f"{target} unreachable: {error_text(exc)}"))
            continue
        for flow, act in activities.items():
            seen[flow] = "still copying" if act.records else f"no progress in {window:g}s"
            if act.records:
                problems.append(
                    f"flow {flow} still copies into {target}: {act.records} progress records in "
                    f"{window:g}s (last {act.last_key}); a replicator of it still runs"
                )
    return problems, seen


def check_groups_and_clients(
    access: ClusterAccess, plan: FailoverPlan, translations: Sequence[Mapping[str, Any]], cluster: str
) -> tuple[list[str], int]:
    """Problems with the applied group offsets in `cluster` (the failover's target, or a failback's restored
    cluster) or the client aliases (those at home in plan.home, when given), and how many groups were checked;
    dr_failback's verify uses it too."""
    topo = access.topology
    admin = access.admin(cluster)
    problems, checked = [], 0
    for summary in translations:
        # Every group's request in flight at once: a thousand groups cost about one round trip, not a thousand.
        reading = list_group_offsets(admin, [ConsumerGroupTopicPartitions(g) for g in summary.get("applied", [])], 30)
        for group, future in reading.items():
            expected = applied_offsets(summary, group)
            result = future.result(30)
            actual = {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions or [] if tp.offset >= 0}
            # At or past the translated offset: an application that moved with its alias has read on since.
            if any(actual.get(key, -1) < offset for key, offset in expected.items()):
                problems.append(f"group {group}: committed {actual} in {cluster}, behind the translated {expected}")
            checked += 1
    left = clients_left(topo, plan)
    if left:
        problems.append(f"clients still on {plan.failed}: {', '.join(left)}")
    return problems, checked
