"""Consumer groups of a flow, on the driver: what they committed in the source, and applying
translated offsets to their namesakes in the target.

A group is applied only while it has no active member in the target: committing under a running
consumer would move it behind its back (and Kafka refuses the commit anyway), so such a group is
left alone and reported.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from ..clients import COORDINATOR_BUSY, describe_groups, in_windows, list_group_offsets
from ..topology import FAILBACK_FLOW_SUFFIX, INTERNAL_TOPIC_PREFIX, Flow, Topology
from .offsets import PartitionRequest, Translated

Committed = dict[str, dict[tuple[str, int], int]]
"""group -> (source topic, partition) -> committed offset"""


def own_groups(topology: Topology) -> set[str]:
    """Groups kafka-dr itself uses (a flow's replication group, its readers, and those of the flow's failback
    inverse, which keeps its progress in the serving cluster): never translated."""
    return {
        name
        for flow in topology.flows
        for replicated in (flow.name, f"{flow.name}{FAILBACK_FLOW_SUFFIX}")
        for name in (replicated, f"{replicated}-resume", f"{replicated}-watermarks")
    }


def select_groups(names: Iterable[str], flow: Flow, topology: Topology, pattern: re.Pattern[str] | None) -> list[str]:
    """Groups of `flow` (its groups filter) that also fully match `pattern` when given."""
    own = own_groups(topology)
    return sorted(
        name
        for name in names
        if name not in own
        and not name.startswith(INTERNAL_TOPIC_PREFIX)
        and flow.groups.matches(name)
        and (pattern is None or pattern.fullmatch(name))
    )


def list_groups(admin: AdminClient, timeout: float) -> list[str]:
    result = admin.list_consumer_groups(request_timeout=timeout).result(timeout)
    return [listing.group_id for listing in result.valid]


def committed_offsets(admin: AdminClient, groups: list[str], flow: Flow, timeout: float) -> Committed:
    """Committed offsets of each group in the flow's source topics (one request per group, all in flight)."""
    futures = list_group_offsets(admin, [ConsumerGroupTopicPartitions(group) for group in groups], timeout)
    committed: Committed = {}
    for group, future in futures.items():
        partitions = future.result(timeout).topic_partitions or []
        offsets = {
            (tp.topic, tp.partition): tp.offset
            for tp in partitions
            if tp.offset >= 0 and tp.error is None and flow.copies_data(tp.topic)
        }
        if offsets:
            committed[group] = offsets
    return committed


def plan_requests(
    committed: Committed,
    flow: Flow,
    source_config: dict[str, Any],
    target_config: dict[str, Any],
    source_cluster_id: str,
    source_ends: dict[tuple[str, int], int],
    unseen_from: Mapping[tuple[str, int], int] | None = None,
) -> list[PartitionRequest]:
    """One request per source partition, carrying every group's offset there (and the destination partition's
    `unseen_from`, see PartitionRequest)."""
    by_partition: dict[tuple[str, int], set[int]] = {}
    for offsets in committed.values():
        for key, offset in offsets.items():
            by_partition.setdefault(key, set()).add(offset)
    return [
        PartitionRequest(
            source_config,
            target_config,
            source_cluster_id,
            topic,
            partition,
            flow.destination_topic(topic),
            tuple(sorted(offsets)),
            source_ends[(topic, partition)],
            flow.provenance,
            (unseen_from or {}).get((flow.destination_topic(topic), partition)),
        )
        for (topic, partition), offsets in sorted(by_partition.items())
    ]


def by_group(committed: Committed, translated: Iterable[Translated]) -> dict[str, list[Translated]]:
    """Spread per-partition translations back over the groups that committed them."""
    lookup = {(t.topic, t.partition, t.source_offset): t for t in translated}
    return {
        group: [lookup[(topic, partition, offset)] for (topic, partition), offset in sorted(offsets.items())]
        for group, offsets in sorted(committed.items())
    }


@dataclass(frozen=True)
class Applied:
    group: str
    applied: bool
    reason: str | None = None  # why not


_RETRY_S = 0.2  # between two asks of a busy group coordinator (clients.COORDINATOR_BUSY): retried, not reported


def apply_offsets(admin: AdminClient, groups: dict[str, list[TopicPartition]], timeout: float) -> list[Applied]:
    """Commit each group's offsets in the target, unless the group has active members there. A group is applied only
    when every partition's commit was: the answer carries an error per partition, which a future's success hides."""
    if not groups:
        return []
    deadline = time.monotonic() + timeout
    described = describe_groups(admin, list(groups), timeout)
    results: list[Applied] = []
    pending: dict[str, list[TopicPartition]] = {}
    for group, offsets in groups.items():
        members = _members(described[group])
        if members:
            results.append(Applied(group, False, f"{members} active member(s) in the target"))
        else:
            pending[group] = offsets

    def commit(window: Sequence[tuple[str, list[TopicPartition]]]) -> dict[str, Future]:
        return {
            group: admin.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group, offsets)], request_timeout=timeout
            )[group]
            for group, offsets in window
        }

    while pending:
        commits = in_windows(list(pending.items()), commit, timeout + 5)
        busy: dict[str, list[TopicPartition]] = {}
        for group, future in commits.items():
            error = _commit_error(future, timeout)
            if error is None:
                results.append(Applied(group, True))
            elif error.code() in COORDINATOR_BUSY and time.monotonic() < deadline:
                busy[group] = pending[group]
            else:
                results.append(Applied(group, False, f"commit refused: {error.str()}"))
        pending = busy
        if pending:
            time.sleep(_RETRY_S)
    return sorted(results, key=lambda a: a.group)


def _commit_error(future: Future, timeout: float) -> KafkaError | None:
    """The first error of a group's commit, the request's or a partition's; None when every partition committed."""
    try:
        result = future.result(timeout)
    except KafkaException as exc:
        return exc.args[0]
    return next((tp.error for tp in result.topic_partitions if tp.error is not None), None)


def _members(answer: Any) -> int:
    """The group's active members in the target (0 for a group it does not know) from its DescribeGroups answer."""
    if isinstance(answer, KafkaException):
        if answer.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
            return 0
        raise answer
    return len(answer.members)
