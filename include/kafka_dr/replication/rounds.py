"""A flow's copy rounds: on the driver, where each source partition's range starts and ends.

Like Spark's Kafka source, the driver decides every range (start, end) and tasks only read them.
A range starts where the destination says the flow stopped (resume.py) and ends at the source's
read_committed end offset taken now, so a bounded run copies a fixed snapshot. Records deleted by
retention before they were copied are counted as lost, never skipped silently.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import OffsetSpec

from ..clients import end_offsets
from ..topology import COPIED_INTERNAL_TOPICS
from . import topic_sync
from .copier import CopyTask
from .flow_clients import FlowClients, with_retries
from .internal import PROGRESS, ensure_internal_topics, latest_value, partition_key, put_records, start_key
from .provenance import ForceCopy
from .resume import Progress, read_progress, resume_offset

log = logging.getLogger(__name__)

Key = tuple[str, int]  # topic, partition
T = TypeVar("T")


@dataclass
class Lost:
    topic: str
    partition: int
    from_offset: int
    to_offset: int  # exclusive: the source log start offset when the round was decided

    @property
    def records(self) -> int:
        return self.to_offset - self.from_offset


@dataclass
class CopyRound:
    """One round's ranges, the records it found lost, and what its topic sync did (None: it synced nothing)."""

    tasks: list[CopyTask]
    lost: list[Lost] = field(default_factory=list)
    sync: topic_sync.SyncReport | None = None


@dataclass(frozen=True)
class _Offsets:
    """What a round reads before it decides: per source partition its log start and read_committed end, per
    destination partition its high watermark and last stable offset (partitions never made are absent)."""

    starts: dict[Key, int]
    ends: dict[Key, int]
    dest_high: dict[Key, int]
    dest_stable: dict[Key, int]


class CopyRounds:
    """The copy rounds of one flow, over its open clients. A round that syncs the destination topics needs
    `prepare_target()` first: the target's internal topics made, the flow's topic state read."""

    def __init__(self, clients: FlowClients, force: ForceCopy | None = None) -> None:
        self.clients, self.flow, self.force = clients, clients.flow, force
        self._flow_state: dict[str, int] | None = None

    def prepare_target(self) -> None:
        """Make the target's internal topics and read the flow's topic state (topic_sync.py) from there."""
        admin = self.clients.target_admin
        self._retried(f"target cluster {self.clients.target.name}", lambda: ensure_internal_topics(admin))
        self._flow_state = topic_sync.load_flow_state(self.clients.target_config, self.flow.name)

    def sync_topics(self) -> topic_sync.SyncReport:
        """Bring the destination topics in line with the source's; the flow's topic state is kept in the target."""
        if self._flow_state is None:
            raise RuntimeError(f"flow {self.flow.name}: prepare_target() comes before a round that syncs topics")
        clients = self.clients
        report = topic_sync.sync_topics(
            self.flow, clients.source_admin, clients.target_admin, flow_state=self._flow_state
        )
        if report.flow_state != self._flow_state:
            self._flow_state = report.flow_state
            topic_sync.persist_flow_state(clients.target_config, self.flow.name, self._flow_state)
        return report

    def next(self, positions: Mapping[Key, int] | None = None, sync: bool = True) -> CopyRound:
        """One round. `positions` are next offsets the driver already knows (continuous mode); other partitions
        resume from the destination. `sync`: first bring the destination topics in line with the source's (False:
        the clusters unchanged; a missing destination partition then resumes from the source's log start)."""
        synced = self._retried(f"clusters of flow {self.flow.name}", self.sync_topics) if sync else None
        copy_round = CopyRound([], sync=synced)
        tps = self._source_partitions()
        if not tps:
            return copy_round
        offsets = self._offsets(tps, sync)
        initial = self._new_flow_start(tps, offsets.ends) if sync else None
        resume = _Resume(self.clients, offsets, positions or {}, initial)
        for tp in tps:
            start = self._kept(tp, resume.position(tp.topic, tp.partition), offsets.starts, copy_round.lost)
            copy_round.tasks.append(self._task(tp, start, offsets))
        if initial is not None:
            self._record_start(resume.started, offsets.dest_stable)
        return copy_round

    def _retried(self, what: str, call: Callable[[], T]) -> T:
        return with_retries(what, call, self.clients.retries)

    def _source_partitions(self) -> list[TopicPartition]:
        counts = self._retried(f"source cluster {self.clients.source.name}", self.clients.source_partitions)
        return [TopicPartition(t, p) for t, n in sorted(counts.items()) for p in range(n)]

    def _offsets(self, tps: list[TopicPartition], sync: bool) -> _Offsets:
        clients = self.clients
        source, target = f"source cluster {clients.source.name}", f"target cluster {clients.target.name}"
        starts = self._retried(source, lambda: clients.offsets(tps, OffsetSpec.earliest()))
        ends = self._retried(source, lambda: clients.offsets(tps, OffsetSpec.latest()))
        # Where each destination stands before the resume search: copy tasks read on from the stable end.
        dests = [(clients.dest_topic(tp.topic), tp.partition) for tp in tps]
        if not sync:  # destinations that were never made hold no copies
            dests = self._retried(target, lambda: clients.existing(dests))
        high, stable = (
            self._retried(target, lambda i=i: end_offsets(clients.target_admin, dests, i))
            for i in (IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED)
        )
        return _Offsets(starts, ends, high, stable)

    def _kept(self, tp: TopicPartition, position: int, starts: dict[Key, int], lost: list[Lost]) -> int:
        """`position`, or the source's log start when retention deleted records from there on before they were
        copied: those are counted in `lost`."""
        log_start = starts[(tp.topic, tp.partition)]
        if position >= log_start:
            return position
        lost.append(Lost(tp.topic, tp.partition, position, log_start))
        log.error(
            "%d records of %s:%s-%d were deleted at the source before they were copied (offsets %d..%d)",
            log_start - position,
            self.clients.source.name,
            tp.topic,
            tp.partition,
            position,
            log_start - 1,
        )
        return log_start

    def _task(self, tp: TopicPartition, start: int, offsets: _Offsets) -> CopyTask:
        clients, dest = self.clients, self.clients.dest_topic(tp.topic)
        return CopyTask(
            self.flow.name,
            clients.source_config,
            clients.target_config,
            clients.source.name,
            clients.target.name,
            clients.source_cluster_id,
            clients.target_cluster_id,
            tp.topic,
            tp.partition,
            dest,
            start,
            offsets.ends[(tp.topic, tp.partition)],
            provenance=self.flow.provenance,
            force=self.force,
            dest_from=offsets.dest_stable.get((dest, tp.partition), 0),
        )

    def _new_flow_start(self, tps: list[TopicPartition], ends: dict[Key, int]) -> dict[Key, int] | None:
        """Per partition, where a new flow's `start` (latest or a time) puts the partitions the destination holds
        nothing of; None when the flow starts at earliest or its `start` was applied already (by an earlier run):
        from then on, topics and partitions found later start at earliest."""
        if self.flow.start == "earliest" or self._start_applied():
            return None
        return self._retried(f"source cluster {self.clients.source.name}", lambda: self._start_offsets(tps, ends))

    def _start_applied(self) -> bool:
        return latest_value(self.clients.target_config, PROGRESS, start_key(self.flow.name)) is not None

    def _start_offsets(self, tps: list[TopicPartition], ends: dict[Key, int]) -> dict[Key, int]:
        """The end now (latest), or the first offset whose timestamp is at or after the start time (the end when
        there is none)."""
        start_ms = self.flow.start_ms
        if start_ms is None:
            return dict(ends)
        found = self.clients.offsets(tps, OffsetSpec.for_timestamp(start_ms))
        return {key: ends[key] if offset < 0 else offset for key, offset in found.items()}

    def _record_start(self, started: dict[Key, int], dest_stable: dict[Key, int]) -> None:
        """Progress records at the start positions, then the marker: a crash before the first copy resumes there, not at
        earliest, and a rerun never applies the start again."""
        records: list[tuple[bytes, Any]] = []
        for (topic, partition), position in started.items():
            dest = self.clients.dest_topic(topic)
            progress = Progress(position, dest, dest_stable.get((dest, partition), 0), self.clients.source_cluster_id)
            records.append((partition_key(self.flow.name, topic, partition), progress.to_dict()))
        put_records(self.clients.target_config, PROGRESS, records)
        put_records(self.clients.target_config, PROGRESS, [(start_key(self.flow.name), {"start": self.flow.start})])
        log.info("flow %s: new, started at %s in %d partitions", self.flow.name, self.flow.start, len(started))


class _Resume:
    """Where each source partition of one round resumes: at the position the driver knows; else at the source's
    log start when its destination partition was never made; else after the last copy the destination holds
    (resume.py); else, in a new flow, where its `start` puts it (`started`); else at the log start."""

    def __init__(
        self, clients: FlowClients, offsets: _Offsets, known: Mapping[Key, int], initial: dict[Key, int] | None
    ) -> None:
        self.clients, self.offsets, self.known, self.initial = clients, offsets, known, initial
        self.started: dict[Key, int] = {}
        self._progress: dict[str, Progress] | None = None  # the flow's progress records, read once if needed

    def position(self, topic: str, partition: int) -> int:
        key, dest = (topic, partition), (self.clients.dest_topic(topic), partition)
        if key in self.known:
            return self.known[key]
        if dest not in self.offsets.dest_high:
            return self.offsets.starts[key]
        copied = self._after_last_copy(topic, partition, dest)
        if copied is not None:
            return copied
        if self.initial is not None and topic not in COPIED_INTERNAL_TOPICS:
            self.started[key] = max(self.initial[key], self.offsets.starts[key])
            return self.started[key]
        return self.offsets.starts[key]

    def _after_last_copy(self, topic: str, partition: int, dest: Key) -> int | None:
        reader = self.clients.reader
        if self._progress is None:
            self._progress = read_progress(reader)
        recorded = self._progress.get(partition_key(self.clients.flow.name, topic, partition).decode())
        source_id = self.clients.source_cluster_id
        return resume_offset(reader, dest[0], partition, source_id, topic, recorded, self.offsets.dest_high[dest])
