"""Driver side of a flow: connect, sync destination topics, and plan offset ranges per partition.

Like Spark's Kafka source, the driver decides every range (start, end) and tasks only read them.
A range starts where the destination says the flow stopped (resume.py) and ends at the source's
read_committed end offset taken now, so a bounded run copies a fixed snapshot. Records deleted by
retention before they were copied are counted as lost, never skipped silently.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from ..clients import client_config, end_offsets, error_text, offsets_of
from ..topology import COPIED_INTERNAL_TOPICS, Flow, Topology
from . import topic_sync
from .copier import CopyTask
from .internal import PROGRESS, ensure_internal_topics, latest_value, partition_key, put_records, start_key
from .provenance import ForceCopy
from .resume import Progress, read_progress, resume_offset

log = logging.getLogger(__name__)


class UnreachableError(RuntimeError):
    """A cluster did not answer after every retry."""


@dataclass
class Lost:
    topic: str
    partition: int
    from_offset: int
    to_offset: int  # exclusive: the source log start offset when planned

    @property
    def records(self) -> int:
        return self.to_offset - self.from_offset


@dataclass
class Plan:
    tasks: list[CopyTask]
    lost: list[Lost] = field(default_factory=list)
    sync: Any = None  # topic_sync.SyncReport of this planning round


def with_retries(what: str, call: Callable[[], Any], attempts: int = 5, first_delay: float = 1.0) -> Any:
    """Retry a cluster call with exponential back-off; then fail with one line naming `what`."""
    delay = first_delay
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except (KafkaException, TimeoutError) as exc:
            if attempt == attempts:
                tries = f"{attempts} attempt" + ("s" if attempts > 1 else "")
                raise UnreachableError(f"{what} unreachable after {tries}: {error_text(exc)}") from None
            log.warning("%s not answering (%s); retry %d/%d in %.0fs", what, error_text(exc), attempt, attempts, delay)
            time.sleep(delay)
            delay *= 2


class FlowContext:
    """Clients and identities of one flow, opened on the driver."""

    def __init__(self, topology: Topology, flow: Flow, retries: int = 5, read_only: bool = False) -> None:
        """`read_only`: for jobs that only read (verify, the failback's measure), which must not make the target's
        internal topics."""
        self.flow = flow
        self.retries = retries
        self.source = topology.cluster(flow.source)
        self.target = topology.cluster(flow.target)
        self.source_config = client_config(self.source)
        self.target_config = client_config(self.target)
        self.source_admin = AdminClient(self.source_config)
        self.target_admin = AdminClient(self.target_config)
        self.source_cluster_id = with_retries(
            f"source cluster {self.source.name} ({self.source.bootstrap_servers})",
            lambda: self.source_admin.describe_cluster(request_timeout=10).result().cluster_id,
            retries,
        )
        self.target_cluster_id = with_retries(
            f"target cluster {self.target.name} ({self.target.bootstrap_servers})",
            lambda: self.target_admin.describe_cluster(request_timeout=10).result().cluster_id,
            retries,
        )
        if not read_only:
            with_retries(
                f"target cluster {self.target.name}", lambda: ensure_internal_topics(self.target_admin), retries
            )
        # Short fetch waits: the reader reads to known ends, and a broker answers a connection's requests in
        # order, so a long-polling fetch would hold up the offset lookups behind it.
        self.reader = Consumer(
            {
                **self.target_config,
                "group.id": f"{flow.name}-resume",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 10,
            }
        )
        self.flow_state = topic_sync.load_flow_state(self.target_config, flow.name)

    def close(self) -> None:
        self.reader.close()

    def commit_copied(self, plan: Plan) -> int:
        """Commit the flow's consumer group on the source (what lag tools and the lag gates read) at the start of
        each of `plan`'s ranges that will not commit it by copying: an open range (a continuous run commits as records
        come) and a bounded one with nothing left to copy. Copy tasks commit what they copy, but a run killed after
        its last copy and before its commit left the group behind, and the run resumed after it may copy nothing.
        Returns the partitions committed."""
        copied = [
            TopicPartition(t.topic, t.partition, t.start)
            for t in plan.tasks
            if t.start > 0 and (t.end is None or t.end <= t.start)
        ]
        if copied:
            consumer = Consumer({**self.source_config, "group.id": self.flow.name, "enable.auto.commit": False})
            try:
                commit = lambda: consumer.commit(offsets=copied, asynchronous=False)  # noqa: E731
                with_retries(f"source cluster {self.source.name}", commit, self.retries)
            finally:
                consumer.close()
        return len(copied)

    def source_partitions(self) -> dict[str, int]:
        """Source topics the flow copies, with partition counts (heartbeats included)."""
        topics = self.source_admin.list_topics(timeout=10).topics
        return {name: len(meta.partitions) for name, meta in topics.items() if self.flow.copies(name)}

    def dest_topic(self, topic: str) -> str:
        return self.flow.destination_topic(topic)

    def sync_topics(self) -> Any:
        report = topic_sync.sync_topics(self.flow, self.source_admin, self.target_admin, flow_state=self.flow_state)
        if report.flow_state != self.flow_state:
            self.flow_state = report.flow_state
            topic_sync.persist_flow_state(self.target_config, self.flow.name, self.flow_state)
        return report

    def existing(self, partitions: list[tuple[str, int]]) -> list[tuple[str, int]]:
        """Those of the target's `partitions` that exist."""
        topics = self.target_admin.list_topics(timeout=10).topics
        return [(t, p) for t, p in partitions if t in topics and p in topics[t].partitions]

    def offsets(self, partitions: list[TopicPartition], spec: OffsetSpec) -> dict[tuple[str, int], int]:
        keys = [(tp.topic, tp.partition) for tp in partitions]
        return offsets_of(self.source_admin, keys, spec, IsolationLevel.READ_COMMITTED, 15)

    def plan(
        self,
        positions: dict[tuple[str, int], int] | None = None,
        force: ForceCopy | None = None,
        from_ms: int | None = None,
        to_ms: int | None = None,
        sync: bool = True,
    ) -> Plan:
        """One planning round. `positions` are next offsets the driver already knows (continuous mode);
        other partitions resume from the destination. `sync`: first bring the destination topics in line with the
        source's (False: plan only, the clusters unchanged; a missing destination partition then resumes from the
        source's log start)."""
        sync_report = (
            with_retries(f"clusters of flow {self.flow.name}", self.sync_topics, self.retries) if sync else None
        )
        counts = with_retries(f"source cluster {self.source.name}", self.source_partitions, self.retries)
        tps = [TopicPartition(t, p) for t, n in sorted(counts.items()) for p in range(n)]
        if not tps:
            return Plan([], sync=sync_report)
        starts = with_retries(
            f"source cluster {self.source.name}", lambda: self.offsets(tps, OffsetSpec.earliest()), self.retries
        )
        ends = with_retries(
            f"source cluster {self.source.name}", lambda: self.offsets(tps, OffsetSpec.latest()), self.retries
        )
        # Where each destination stands before the resume search: copy tasks read on from the stable end.
        dests = [(self.dest_topic(tp.topic), tp.partition) for tp in tps]
        if not sync:  # destinations that were never made hold no copies
            dests = with_retries(f"target cluster {self.target.name}", lambda: self.existing(dests), self.retries)
        dest_high, dest_stable = (
            with_retries(
                f"target cluster {self.target.name}", lambda i=i: end_offsets(self.target_admin, dests, i), self.retries
            )
            for i in (IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED)
        )
        progress: dict[str, Progress] | None = None
        initial = None  # a new flow's `start` (latest or a time) for partitions the destination holds nothing of
        if sync and self.flow.start != "earliest" and not self._start_applied():
            initial = with_retries(
                f"source cluster {self.source.name}", lambda: self._start_offsets(tps, ends), self.retries
            )
        started: dict[tuple[str, int], int] = {}
        plan = Plan([], sync=sync_report)
        for tp in tps:
            key = (tp.topic, tp.partition)
            dest = self.dest_topic(tp.topic)
            position = (positions or {}).get(key)
            if position is None and (dest, tp.partition) not in dest_high:
                position = starts[key]
            if position is None:
                if progress is None:
                    progress = read_progress(self.reader)
                recorded = progress.get(partition_key(self.flow.name, tp.topic, tp.partition).decode())
                position = resume_offset(
                    self.reader,
                    dest,
                    tp.partition,
                    self.source_cluster_id,
                    tp.topic,
                    recorded,
                    dest_high[(dest, tp.partition)],
                )
                if position is None and initial is not None and tp.topic not in COPIED_INTERNAL_TOPICS:
                    position = started[key] = max(initial[key], starts[key])
                if position is None:
                    position = starts[key]
            if position < starts[key]:
                plan.lost.append(Lost(tp.topic, tp.partition, position, starts[key]))
                log.error(
                    "%d records of %s:%s-%d were deleted at the source before they were copied (offsets %d..%d)",
                    starts[key] - position,
                    self.source.name,
                    tp.topic,
                    tp.partition,
                    position,
                    starts[key] - 1,
                )
                position = starts[key]
            plan.tasks.append(
                CopyTask(
                    self.flow.name,
                    self.source_config,
                    self.target_config,
                    self.source.name,
                    self.target.name,
                    self.source_cluster_id,
                    self.target_cluster_id,
                    tp.topic,
                    tp.partition,
                    dest,
                    position,
                    ends[key],
                    provenance=self.flow.provenance,
                    force=force,
                    from_ms=from_ms,
                    to_ms=to_ms,
                    dest_from=dest_stable.get((dest, tp.partition), 0),
                )
            )
        if initial is not None:
            self._record_start(started, dest_stable)
        return plan

    def _start_applied(self) -> bool:
        """Whether the flow's `start` was applied already (by an earlier run): from then on, partitions the
        destination holds nothing of (topics and partitions found later) start at earliest."""
        return latest_value(self.target_config, PROGRESS, start_key(self.flow.name)) is not None

    def _start_offsets(self, tps: list[TopicPartition], ends: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """Per partition, where `start` puts a new flow: the end now (latest), or the first offset whose timestamp
        is at or after the start time (the end when there is none)."""
        start_ms = self.flow.start_ms
        if start_ms is None:
            return dict(ends)
        found = self.offsets(tps, OffsetSpec.for_timestamp(start_ms))
        return {key: ends[key] if offset < 0 else offset for key, offset in found.items()}

    def _record_start(self, started: dict[tuple[str, int], int], dest_stable: dict[tuple[str, int], int]) -> None:
        """Progress records at the start positions, then the marker: a crash before the first copy resumes there, not at
        earliest, and a rerun never applies the start again."""
        records: list[tuple[bytes, Any]] = []
        for (topic, partition), position in started.items():
            dest = self.dest_topic(topic)
            progress = Progress(position, dest, dest_stable.get((dest, partition), 0), self.source_cluster_id)
            records.append((partition_key(self.flow.name, topic, partition), progress.to_dict()))
        put_records(self.target_config, PROGRESS, records)
        put_records(self.target_config, PROGRESS, [(start_key(self.flow.name), {"start": self.flow.start})])
        log.info("flow %s: new, started at %s in %d partitions", self.flow.name, self.flow.start, len(started))
