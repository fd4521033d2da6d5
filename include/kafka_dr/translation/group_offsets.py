"""Where one consumer group should resume in another cluster: the application's side of offset translation
(MirrorMaker 2's `RemoteClusterUtils.translateOffsets`).

    offsets = translated_offsets("billing", "dc2")          # the checkpoints kept in dc2: works with dc1 lost
    consumer.assign(offsets.topic_partitions())              # or commit them: offsets.apply()
    offsets.checkpoint_age_s()                               # how old the newest translation is

Every flow into the cluster that replicates the group's topics answers for its partitions, named as the target
names them (the flow's rename; `source_topic` keeps the source's name). `CHECKPOINTS` (the default) reads the
translations the replicator keeps in the target's `_kdr.checkpoints`, which is what a consumer in the target
should use during a disaster; `LIVE` reads the group's committed offsets in the source now and translates them,
and needs the source to answer. Both are the DAG's own translation (translation.checkpoints), so equally exact.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass
from typing import Any

from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient

from ..access import ClusterAccess
from ..clients import end_offsets
from ..replication.internal import CHECKPOINTS as CHECKPOINTS_TOPIC
from ..replication.internal import read_records
from ..topology import Flow, Topology, TopologyError
from .checkpoints import TIMEOUT_S, dated_checkpoints_in, translate_from_source
from .groups import Applied, apply_offsets, own_groups

CHECKPOINTS, LIVE = "checkpoints", "live"


@dataclass(frozen=True)
class PartitionOffset:
    """One partition of the target where the group resumes."""

    flow: str
    topic: str  # the target's name
    partition: int
    source_topic: str
    source_offset: int  # the group's committed offset in the source
    offset: int  # where it resumes in the target
    method: str  # provenance, or timestamp for a flow without provenance
    checkpoint_ms: int | None  # when the translation was kept, or last confirmed, in the target; None: translated live
    lag: int  # records of the target partition from `offset` to its end


@dataclass(frozen=True)
class GroupOffsets:
    group: str
    cluster: str
    source: str  # CHECKPOINTS or LIVE
    partitions: list[PartitionOffset]
    access: ClusterAccess

    def topic_partitions(self) -> list[TopicPartition]:
        """For Consumer.assign, commit or the AdminClient."""
        return [TopicPartition(p.topic, p.partition, p.offset) for p in self.partitions]

    def checkpoint_age_s(self, now_ms: int | None = None) -> float | None:
        """Seconds since the oldest checkpoint used was made; None when translated live or nothing was found."""
        kept = [p.checkpoint_ms for p in self.partitions if p.checkpoint_ms is not None]
        if not kept:
            return None
        return round(((now_ms if now_ms is not None else int(time.time() * 1000)) - min(kept)) / 1000, 3)

    def apply(self, timeout: float = TIMEOUT_S) -> Applied:
        """Commit these offsets for the group in the cluster, unless it has an active member there (then nothing is
        committed and `Applied.reason` says why): the DAG's own rule."""
        admin = self.access.admin(self.cluster)
        if not self.partitions:
            return Applied(self.group, False, f"no translated offsets for group {self.group} in {self.cluster}")
        return apply_offsets(admin, {self.group: self.topic_partitions()}, timeout)[0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "cluster": self.cluster,
            "source": self.source,
            "checkpoint_age_s": self.checkpoint_age_s(),
            "partitions": [asdict(p) for p in self.partitions],
        }


def translated_offsets(
    group: str,
    to_cluster: str,
    access: ClusterAccess,
    flow: str | None = None,
    source: str = CHECKPOINTS,
    timeout: float = TIMEOUT_S,
) -> GroupOffsets:
    """Where `group` resumes in `to_cluster`, per partition of the target, by every flow into it (or `flow` only).
    Bad input (an unknown cluster or flow, a flow that does not replicate into `to_cluster` or not this group)
    raises TopologyError with one line; an unreachable cluster raises the client's error."""
    topology = access.topology
    topology.cluster(to_cluster)
    if source not in (CHECKPOINTS, LIVE):
        raise ValueError(f"source must be {CHECKPOINTS!r} or {LIVE!r}, not {source!r}")
    if group in own_groups(topology):
        raise TopologyError(f"group {group!r} is kafka-dr's own: it is never translated")
    flows = _flows(topology, group, to_cluster, flow)
    target_config = access.config(to_cluster)
    found: list[tuple[Flow, Any, int | None]] = []  # flow, Translated, checkpoint time
    if source == CHECKPOINTS:
        records = list(read_records(target_config, CHECKPOINTS_TOPIC))  # one read, every flow's checkpoints
        for f in flows:
            dated, _ = dated_checkpoints_in(records, f.name)
            found += [(f, t, at_ms) for t, at_ms in dated.get(group, [])]
    else:
        pattern = re.compile(re.escape(group))
        for f in flows:
            found += [(f, t, None) for t in translate_from_source(access, f, pattern).get(group, [])]
    keys = [(t.dest_topic, t.partition) for _, t, _ in found]
    ends = end_offsets(AdminClient(target_config), keys, IsolationLevel.READ_COMMITTED, timeout) if keys else {}
    partitions = [
        PartitionOffset(
            f.name,
            t.dest_topic,
            t.partition,
            t.topic,
            t.source_offset,
            t.dest_offset,
            t.method,
            at_ms,
            max(ends[(t.dest_topic, t.partition)] - t.dest_offset, 0),
        )
        for f, t, at_ms in found
    ]
    return GroupOffsets(group, to_cluster, source, sorted(partitions, key=lambda p: (p.topic, p.partition)), access)


def _flows(topology: Topology, group: str, to_cluster: str, name: str | None) -> list[Flow]:
    if name is not None:
        chosen = topology.flow(name)
        if chosen.target != to_cluster:
            raise TopologyError(f"flow {chosen.name} replicates into {chosen.target}, not {to_cluster}")
        if not chosen.groups.matches(group):
            raise TopologyError(f"flow {chosen.name} does not translate group {group!r} (its groups filter)")
        return [chosen]
    flows = [f for f in topology.flows if f.target == to_cluster and f.groups.matches(group)]
    if not flows:
        raise TopologyError(f"no flow of the topology replicates group {group!r} into {to_cluster}")
    return flows
