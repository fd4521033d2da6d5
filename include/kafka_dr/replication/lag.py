"""Replication lag of a flow, per source partition, as docs/design.md defines it.

- In records: the source's read_committed end (last stable offset) minus the next offset to copy,
  which the replication job commits as consumer group <flow name> on the source (so standard lag
  tools agree). Transaction markers and aborted records are not counted: up to `COUNT_LIMIT`
  uncopied offsets are read with a read_committed consumer and the data records counted; above
  that the offset difference is reported, marked `estimated`.
- In seconds: the age of the oldest uncopied record (0 when nothing is uncopied).
- Heartbeat latency: for the newest heartbeat copied into the target by this flow, how long after
  it entered the source it was copied.

Only reads; never commits or joins a group, so measuring cannot disturb the flow.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from ..access import ClusterAccess
from ..clients import (
    STALE_METADATA,
    committed_reader,
    error_text,
    list_group_offsets,
    offsets_of,
    read_committed,
    read_committed_with,
)
from ..topology import Flow
from .internal import HEARTBEATS, PROGRESS, newest_value, put_records
from .provenance import ProvenanceError, hops

COUNT_LIMIT = 10_000
"""Up to this many uncopied offsets in a partition, data records are counted exactly."""
HEARTBEAT_WINDOW = 1_000
"""Heartbeat records read from the end of each partition of the target's heartbeat topic."""


T = TypeVar("T")


class LagError(RuntimeError):
    """Lag could not be measured; the message is one line naming the cluster and why; `cluster`: its name.
    `answered`: the cluster answered, with an error (a partition without a leader yet, a refused request): it is not
    lost, and no failover is proposed for it."""

    def __init__(self, message: str, cluster: str | None = None, answered: bool = False) -> None:
        super().__init__(message)
        self.cluster = cluster
        self.answered = answered


# What librdkafka reports when a cluster does not answer at all; any other error came from a cluster that answered.
NOT_ANSWERING = (
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._TIMED_OUT,
    KafkaError._MSG_TIMED_OUT,
    KafkaError._RESOLVE,
    KafkaError._WAIT_COORD,
)


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    dest_topic: str
    next_offset: int
    end_offset: int
    lag_records: int
    lag_seconds: float
    estimated: bool = False
    start_offset: int = 0  # the source's log start: past next_offset, records were deleted before they were copied
    committed: bool = True  # the flow has committed a position here (else next_offset is where it would start)

    @property
    def name(self) -> str:
        return f"{self.topic}[{self.partition}]"


@dataclass(frozen=True)
class FlowLag:
    flow: str
    source: str
    target: str
    partitions: tuple[PartitionLag, ...]
    heartbeat_latency_s: float | None
    measured_at_ms: int

    @property
    def total_records(self) -> int:
        return sum(p.lag_records for p in self.partitions)

    @property
    def max_records(self) -> int:
        return max((p.lag_records for p in self.partitions), default=0)

    @property
    def max_seconds(self) -> float:
        return max((p.lag_seconds for p in self.partitions), default=0.0)

    def to_json(self) -> dict[str, Any]:
        """JSON-safe dict (Airflow trigger payloads, `kafka-dr lag --json`); totals included for readers."""
        return {
            "flow": self.flow,
            "source": self.source,
            "target": self.target,
            "measured_at_ms": self.measured_at_ms,
            "heartbeat_latency_s": self.heartbeat_latency_s,
            "total_records": self.total_records,
            "max_records": self.max_records,
            "max_seconds": self.max_seconds,
            "partitions": [asdict(p) for p in self.partitions],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FlowLag:
        """Inverse of `to_json`; derived totals are recomputed, not trusted."""
        return cls(
            flow=data["flow"],
            source=data["source"],
            target=data["target"],
            partitions=tuple(PartitionLag(**p) for p in data["partitions"]),
            heartbeat_latency_s=data["heartbeat_latency_s"],
            measured_at_ms=data["measured_at_ms"],
        )


def check_thresholds(lag: FlowLag, max_records: int | None, max_seconds: float | None) -> tuple[bool, str]:
    """Gate rule for sensors and health checks: every partition within both limits (None: not checked).

    Returns (ok, one-line reason naming the worst partition)."""
    for name, limit in (("max_records", max_records), ("max_seconds", max_seconds)):
        if limit is not None and limit < 0:
            raise ValueError(f"{name} must be >= 0, got {limit}")
    problems = []
    by_records = max(lag.partitions, key=lambda p: p.lag_records, default=None)
    by_seconds = max(lag.partitions, key=lambda p: p.lag_seconds, default=None)
    if max_records is not None and by_records is not None and by_records.lag_records > max_records:
        about = "about " if by_records.estimated else ""
        problems.append(
            f"{lag.source}:{by_records.name} lags {about}{by_records.lag_records:,} records (limit {max_records:,})"
        )
    if max_seconds is not None and by_seconds is not None and by_seconds.lag_seconds > max_seconds:
        problems.append(f"{lag.source}:{by_seconds.name} lags {by_seconds.lag_seconds:.1f} s (limit {max_seconds:g} s)")
    if problems:
        return False, f"flow {lag.flow}: " + "; ".join(problems)
    if by_records is None:
        return True, f"flow {lag.flow}: no source partitions to copy"
    return True, (
        f"flow {lag.flow}: within limits (worst {lag.source}:{by_records.name} {lag.max_records:,} records, "
        f"{lag.source}:{by_seconds.name} {lag.max_seconds:.1f} s)"
    )


def flow_lag(access: ClusterAccess, flow_name: str, *, topics: str | None = None, timeout: float = 10.0) -> FlowLag:
    """Measure the lag of one flow of `access`'s topology; `topics` (regex, full match) restricts the source topics
    measured."""
    flow = access.topology.flow(flow_name)
    only = re.compile(topics) if topics is not None else None
    source = ClusterSide("source", flow.name, access, flow.source, timeout)
    target = ClusterSide("target", flow.name, access, flow.target, timeout)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kdr-lag") as pool:
        heartbeats = pool.submit(read_heartbeats, target)  # the target's part runs beside the source's
        measured = source_lag(flow, source, source_partitions(flow, source, only))
        latency = heartbeat_latency(heartbeats.result(), measured.cluster_id)
    return FlowLag(flow.name, flow.source, flow.target, measured.partitions, latency, measured.at_ms)


@dataclass(frozen=True)
class SourcePartitions:
    """A flow's source partitions as listed at the start of a measurement, and the source's id."""

    cluster_id: str
    partitions: list[TopicPartition]


@dataclass(frozen=True)
class SourceLag:
    """The source's half of a flow's lag: every partition's lag, when it was measured, and the source's id."""

    cluster_id: str
    at_ms: int
    partitions: tuple[PartitionLag, ...]


def source_partitions(flow: Flow, source: ClusterSide, only: re.Pattern[str] | None = None) -> SourcePartitions:
    """The source's id and the flow's source partitions (of topics matching `only` too, when given), as of now."""
    cluster_id = source.cluster_id()
    metadata = source.call("list topics", lambda: source.admin.list_topics(timeout=source.timeout))
    partitions = sorted(
        TopicPartition(name, p)
        for name, meta in metadata.topics.items()
        if flow.copies_data(name) and (only is None or only.fullmatch(name))
        for p in meta.partitions
    )
    return SourcePartitions(cluster_id, partitions)


def source_lag(flow: Flow, source: ClusterSide, listed: SourcePartitions) -> SourceLag:
    """Lag of the listed source partitions: log start, read_committed end and the flow's committed position in one
    round of requests, then the uncopied records counted."""
    partitions = listed.partitions
    measured_at_ms = _now_ms()
    starts, ends, committed = source.positions(partitions)

    counted: dict[tuple[str, int], int] = {}
    oldest: dict[tuple[str, int], int] = {}
    ranges: dict[tuple[str, int], tuple[int, int]] = {}
    first_only: set[tuple[str, int]] = set()
    for tp in partitions:
        key = (tp.topic, tp.partition)
        next_offset = committed.get(key, starts[key])
        if ends[key] > next_offset:
            ranges[key] = (max(next_offset, starts[key]), ends[key])
            if ends[key] - next_offset > COUNT_LIMIT:
                first_only.add(key)
    for msg in source.scan(ranges, first_only):
        key = (msg.topic(), msg.partition())
        counted[key] = counted.get(key, 0) + 1
        oldest.setdefault(key, msg.timestamp()[1])

    result = []
    for tp in partitions:
        key = (tp.topic, tp.partition)
        next_offset, end = committed.get(key, starts[key]), ends[key]
        lost = max(0, starts[key] - next_offset)  # deleted by retention before they were copied
        estimated = key in first_only or lost > 0
        records = max(0, end - next_offset) if key in first_only else counted.get(key, 0) + lost
        seconds = max(0.0, (measured_at_ms - oldest[key]) / 1000) if records and key in oldest else 0.0
        result.append(
            PartitionLag(
                tp.topic,
                tp.partition,
                flow.destination_topic(tp.topic),
                next_offset,
                end,
                records,
                seconds,
                estimated,
                starts[key],
                key in committed,
            )
        )
    return SourceLag(listed.cluster_id, measured_at_ms, tuple(result))


def read_heartbeats(target: ClusterSide) -> list[Message]:
    """The newest HEARTBEAT_WINDOW records of each partition of the target's heartbeat topic."""
    target.cluster_id()  # connects first: see ClusterSide.cluster_id
    meta = target.call("list topics", lambda: target.admin.list_topics(timeout=target.timeout)).topics.get(HEARTBEATS)
    if meta is None or meta.error is not None:
        return []
    starts, ends = target.starts_and_ends([TopicPartition(HEARTBEATS, p) for p in meta.partitions])
    return list(target.scan({key: (max(starts[key], end - HEARTBEAT_WINDOW), end) for key, end in ends.items()}))


def heartbeat_latency(heartbeats: Iterable[Message], source_cluster_id: str) -> float | None:
    """Latency of the newest heartbeat whose last hop came from the source cluster, or None if none was seen.

    Measured from when the record entered the source (its timestamp, or the previous hop's time when the
    source itself holds a copy) to when this flow copied it, so a chain is charged hop by hop."""
    newest: tuple[int, float] | None = None
    for msg in heartbeats:
        try:
            chain = hops(msg.headers())
        except ProvenanceError:
            continue  # not a copy of ours: irrelevant to this flow
        if not chain or chain[-1].cluster_id != source_cluster_id:
            continue
        entered_ms = chain[-2].timestamp_ms if len(chain) > 1 else msg.timestamp()[1]
        copied_ms = chain[-1].timestamp_ms
        if newest is None or copied_ms > newest[0]:
            newest = (copied_ms, (copied_ms - entered_ms) / 1000)
    return None if newest is None else newest[1]


class ClusterSide:
    """One cluster of a flow, with one admin client for all its requests; every failure becomes a one-line
    LagError naming the cluster."""

    def __init__(self, role: str, flow: str, access: ClusterAccess, cluster: str, timeout: float) -> None:
        self.role, self.flow, self.cluster, self.timeout = role, flow, access.topology.cluster(cluster), timeout
        self.config = access.config(cluster)
        self.admin = AdminClient(self.config)

    def error(self, what: str, exc: Exception) -> LagError:
        """The one-line LagError for `exc`; a timeout or a transport error means the cluster did not answer."""
        where = f"{self.role} cluster {self.cluster.name} ({self.cluster.bootstrap_servers})"
        answered = isinstance(exc, KafkaException) and exc.args[0].code() not in NOT_ANSWERING
        return LagError(f"flow {self.flow}: {where}: {what} failed: {error_text(exc)}", self.cluster.name, answered)

    def call(self, what: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except KafkaException as exc:
            raise self.error(what, exc) from None

    def cluster_id(self) -> str:
        """The cluster's id. Ask it first: librdkafka's metadata call on a client that has not connected yet often
        waits about 50 ms longer than an Admin API request."""
        described = self.call("describe cluster", lambda: self.admin.describe_cluster(request_timeout=self.timeout))
        return self.call("describe cluster", described.result).cluster_id

    def request_offsets(self, partitions: list[TopicPartition], spec: OffsetSpec) -> dict[TopicPartition, Future]:
        """Send the request for the log start or read_committed end (last stable offset) of each partition."""
        if not partitions:
            return {}
        return self.call(
            "list offsets",
            lambda: self.admin.list_offsets(
                {tp: spec for tp in partitions},
                isolation_level=IsolationLevel.READ_COMMITTED,
                request_timeout=self.timeout,
            ),
        )

    def request_committed(self, partitions: list[TopicPartition]) -> Future | None:
        """Send the request for the flow's committed positions (None: no partitions, nothing asked)."""
        if not partitions:
            return None
        request = [ConsumerGroupTopicPartitions(self.flow, partitions)]
        futures = self.call("list group offsets", lambda: list_group_offsets(self.admin, request, self.timeout))
        return futures[self.flow]

    def answered_offsets(self, futures: dict[TopicPartition, Future], spec: OffsetSpec) -> dict[tuple[str, int], int]:
        """The offsets `request_offsets(..., spec)` asked for. A partition whose leader is not known yet (a topic just
        made, a node just started: Apache Kafka answers NOT_LEADER_FOR_PARTITION) has them all asked again after a
        metadata refresh (clients.offsets_of)."""
        try:
            return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}
        except KafkaException as exc:
            if exc.args[0].code() not in STALE_METADATA:
                raise self.error("list offsets", exc) from None
        partitions = [(tp.topic, tp.partition) for tp in futures]
        isolation = IsolationLevel.READ_COMMITTED
        return self.call("list offsets", lambda: offsets_of(self.admin, partitions, spec, isolation, self.timeout))

    def answered_committed(self, future: Future | None) -> dict[tuple[str, int], int]:
        """Next offset to copy per partition, as committed by the replication job; partitions without a commit
        are left out."""
        if future is None:
            return {}
        result = self.call("list group offsets", future.result)
        return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}

    def starts_and_ends(
        self, partitions: list[TopicPartition]
    ) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
        """Log start and read_committed end (last stable offset) of each partition, both asked before waiting."""
        specs = (OffsetSpec.earliest(), OffsetSpec.latest())
        asked = [self.request_offsets(partitions, spec) for spec in specs]
        return self.answered_offsets(asked[0], specs[0]), self.answered_offsets(asked[1], specs[1])

    def positions(
        self, partitions: list[TopicPartition]
    ) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int], dict[tuple[str, int], int]]:
        """Log starts, read_committed ends and the flow's committed positions, asked in one round of requests."""
        committed = self.request_committed(partitions)
        starts, ends = self.starts_and_ends(partitions)
        return starts, ends, self.answered_committed(committed)

    def scan(
        self,
        ranges: dict[tuple[str, int], tuple[int, int]],
        first_only: set[tuple[str, int]] | None = None,
        reader: Consumer | None = None,
    ) -> Iterator[Message]:
        """Records of `ranges` (clients.read_committed_with), read by `reader` (from `reader()`) or a consumer made
        now."""
        try:
            if reader is None:
                yield from read_committed(self.config, ranges, self.timeout, first_only)
            else:
                yield from read_committed_with(reader, ranges, self.timeout, first_only)
        except (KafkaException, TimeoutError) as exc:
            raise self.error("reading records", exc) from None

    def reader(self) -> Consumer:
        """A consumer for one `scan`, made now to connect while other requests run (clients.committed_reader)."""
        return committed_reader(self.config)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _snapshot_key(flow: str) -> bytes:
    return f"{flow}/__lag__".encode()


def save_snapshot(target_config: dict[str, Any], lag: FlowLag) -> None:
    """Keep the flow's last lag measurement in the target's `_kdr.progress`: once the source is lost it
    is the best estimate of what was never replicated (the RPO of a disaster)."""
    put_records(target_config, PROGRESS, [(_snapshot_key(lag.flow), lag.to_json())])


def load_snapshot(target_config: dict[str, Any], flow: str) -> FlowLag | None:
    """The flow's last lag snapshot, read back from the end of `_kdr.progress` (every checkpoint pass writes one:
    it is near the end, whatever the topic's age)."""
    value = newest_value(target_config, PROGRESS, _snapshot_key(flow))
    return None if value is None else FlowLag.from_json(json.loads(value))
