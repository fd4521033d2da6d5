"""Copy planned offset ranges of source partitions into the destination (runs in a Spark task).

Keys, values (null included), headers and the CreateTime timestamp are copied unchanged into the
same partition, with one provenance hop appended; records that the cycle rule blocks, or that
fall outside a requested time range, are counted as filtered. The source is read with
read_committed, so aborted records and transaction markers are never copied.

A task copies a group of ranges with one consumer assigned to all of them. A bounded range ends at
its planned end offset; an open range (continuous mode) keeps its partition assigned and copies
records as they arrive until the task's run time is over, so a record waits for no job launch.

No gap, no duplicate, without a coordinator: the producer is idempotent and keeps order, so after
any crash the destination holds a prefix of what this task sent, and the next run resumes from
the destination (resume.py). Progress (`_kdr.progress`, offset syncs, the source consumer group
named after the flow) is written only after the copies it covers are acknowledged.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from ..clients import next_batch
from .internal import OFFSET_SYNCS, PROGRESS, progress_key
from .provenance import HEADER, ForceCopy, blocked, hop_prefix, hops
from .resume import Checkpoint

log = logging.getLogger(__name__)

STALL_TIMEOUT_S = 60.0  # no data and no end-of-partition for this long: the source is unreachable


class CopyError(RuntimeError):
    """A range could not be copied; nothing past the last checkpoint was recorded as done."""


@dataclass(frozen=True)
class CopyTask:
    flow: str
    source_config: dict[str, Any]
    target_config: dict[str, Any]
    source_cluster: str  # topology names, for messages
    target_cluster: str
    source_cluster_id: str
    target_cluster_id: str
    topic: str
    partition: int
    dest_topic: str
    start: int
    end: int | None  # exclusive, at most the read_committed end when planned; None: open (continuous)
    provenance: bool = True
    force: ForceCopy | None = None
    from_ms: int | None = None  # copy only records with from_ms <= timestamp < to_ms
    to_ms: int | None = None
    checkpoint_every: int = 50_000  # copies of one partition between durable checkpoints


@dataclass
class CopyResult:
    topic: str
    partition: int
    dest_topic: str
    start: int
    next: int
    records: int = 0
    bytes: int = 0
    filtered: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    seconds: float = 0.0
    checkpoints: list[int] = field(default_factory=list)  # source positions made durable
    dest_watermarks: list[int] = field(default_factory=list)  # destination end at the start and each checkpoint

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Clients:
    consumer: Consumer  # source, read_committed, group = flow name
    producer: Producer  # target, idempotent; delivery reports for failures only
    target: Consumer  # target, only for high watermarks
    errors: list[KafkaError] = field(default_factory=list)

    def failed(self, err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            self.errors.append(err)


_CLIENTS: dict[str, _Clients] = {}


def _clients(flow: str, source_config: dict[str, Any], target_config: dict[str, Any]) -> _Clients:
    """Clients cached per Python worker and flow: continuous epochs reuse their connections."""
    key = json.dumps([flow, source_config, target_config], sort_keys=True, default=str)
    if key not in _CLIENTS:
        consumer = Consumer({
            **source_config, "group.id": flow, "enable.auto.commit": False,
            "enable.auto.offset.store": False, "isolation.level": "read_committed",
            "enable.partition.eof": True, "auto.offset.reset": "error",
            "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760,
            "queued.max.messages.kbytes": 262_144, "fetch.wait.max.ms": 100, "on_commit": _commit_failed,
        })
        producer = Producer({
            **target_config, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
            "batch.size": 1_000_000, "batch.num.messages": 10_000, "delivery.report.only.error": True,
            "queue.buffering.max.messages": 500_000, "queue.buffering.max.kbytes": 1_048_576,
        })
        target = Consumer({**target_config, "group.id": f"{flow}-watermarks"})
        _CLIENTS[key] = _Clients(consumer, producer, target)
    return _CLIENTS[key]


def open_clients(flow: str, source_config: dict[str, Any], target_config: dict[str, Any], _task: Any = None) -> None:
    """Open this worker's clients for `flow` and connect them, ahead of its copy tasks (a warm-up Spark
    job while the driver plans), so that worker start-up, connections and the idempotent producer's id
    are ready when copying starts."""
    clients = _clients(flow, source_config, target_config)
    for client in (clients.consumer, clients.producer, clients.target):
        client.list_topics(timeout=10)


def _commit_failed(err: KafkaError | None, _partitions: list[TopicPartition]) -> None:
    if err is not None:
        log.warning("flow group commit failed (the next checkpoint commits again): %s", err.str())


def close_clients() -> None:
    """Close the cached clients (in-process callers; Spark workers simply exit)."""
    while _CLIENTS:
        clients = _CLIENTS.popitem()[1]
        clients.consumer.close()
        clients.target.close()
        clients.producer.flush(5)


@dataclass
class _Partition:
    """Where the copy of one range stands inside a task."""

    task: CopyTask
    result: CopyResult
    prefix: bytes  # provenance hop up to the origin offset
    position: int  # next source offset to copy
    recorded: int  # position of the last durable checkpoint
    chunk_first: int | None = None  # source offset of the first copy since that checkpoint
    since_checkpoint: int = 0

    @property
    def done(self) -> bool:
        return self.task.end is not None and self.position >= self.task.end


def copy_ranges(tasks: Iterable[CopyTask], run_for: float | None = None,
                progress_interval: float | None = None) -> list[CopyResult]:
    """Copy a group of ranges of one flow. Bounded ranges end at their end offset; open ranges are
    copied for `run_for` seconds. Progress is recorded every `checkpoint_every` copies of a
    partition, every `progress_interval` seconds if given, and at the end."""
    parts = [_Partition(t, CopyResult(t.topic, t.partition, t.dest_topic, t.start, t.start),
                        hop_prefix(t.source_cluster_id, t.topic, t.partition), t.start, t.start) for t in tasks]
    active = {(p.task.topic, p.task.partition): p for p in parts if not p.done}
    if not active:
        return [p.result for p in parts]
    first = parts[0].task
    clients = _clients(first.flow, first.source_config, first.target_config)
    consumer, producer = clients.consumer, clients.producer
    clients.errors.clear()
    for p in active.values():
        p.result.dest_watermarks.append(_dest_end(p.task, clients))
    consumer.assign([TopicPartition(t, n, p.position) for (t, n), p in active.items()])
    started = time.monotonic()
    deadline = None if run_for is None else started + run_for
    next_progress = None if progress_interval is None else started + progress_interval
    last_data = started
    try:
        while active and (deadline is None or time.monotonic() < deadline):
            messages = next_batch(consumer)
            producer.poll(0)  # serve delivery failures while copying
            now = time.monotonic()
            if messages:
                last_data = now
            elif now - last_data > STALL_TIMEOUT_S and any(p.task.end is not None for p in active.values()):
                p = next(p for p in active.values() if p.task.end is not None)
                raise CopyError(f"source {first.source_cluster} unreachable: no data for {STALL_TIMEOUT_S:.0f}s "
                                f"while copying {p.task.topic}-{p.task.partition} at offset {p.position}")
            _copy(messages, active, producer, clients.failed)
            finished = [key for key, p in active.items() if p.done]
            if finished:
                consumer.incremental_unassign([TopicPartition(*key) for key in finished])
                for key in finished:
                    del active[key]
            due = any(p.since_checkpoint >= p.task.checkpoint_every for p in active.values())
            if next_progress is not None and now >= next_progress:
                due, next_progress = True, now + progress_interval
            if due:
                _checkpoint(clients, parts, final=False)
        _checkpoint(clients, parts, final=True)
    finally:
        consumer.unassign()
    seconds = round(time.monotonic() - started, 3)
    for p in parts:
        p.result.seconds = seconds
    return [p.result for p in parts]


def _copy(messages: list[Message], active: dict[tuple[str, int], _Partition], producer: Producer,
          callback) -> None:
    """Copy one fetched batch into the ranges it belongs to (end-of-partition events move positions)."""
    copied_at = b",%d" % int(time.time() * 1000)  # one copy time per fetched batch
    part: _Partition | None = None
    for message in messages:
        key = (message.topic(), message.partition())
        if part is None or (part.task.topic, part.task.partition) != key:
            part = active.get(key)
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF and part is not None:
                end = part.task.end
                part.position = max(part.position, message.offset() if end is None else min(message.offset(), end))
                continue
            raise CopyError(f"reading {part.task.source_cluster if part else 'source'}:{key[0]}-{key[1]}: "
                            f"{error.str()}")
        if part is None or part.done:
            continue  # fetched before its range ended and it was unassigned
        task, offset = part.task, message.offset()
        if task.end is not None and offset >= task.end:
            part.position = task.end
            continue
        part.position = offset + 1
        headers = message.headers() or []
        timestamp = message.timestamp()[1]
        result = part.result
        if headers:
            try:
                chain = hops(headers)
            except ValueError as exc:
                raise CopyError(f"{task.source_cluster}:{task.topic}-{task.partition} offset {offset}: {exc}") \
                    from None
            if chain and blocked(chain, task.target_cluster_id, task.dest_topic, timestamp, task.force):
                result.filtered += 1
                continue
        if (task.from_ms is not None and timestamp < task.from_ms) or \
                (task.to_ms is not None and timestamp >= task.to_ms):
            result.filtered += 1
            continue
        if task.provenance:
            headers.append((HEADER, part.prefix + b"%d" % offset + copied_at))
        value, key_bytes = message.value(), message.key()
        _produce(producer, task.dest_topic, key_bytes, value, headers, task.partition, timestamp, callback)
        if part.chunk_first is None:
            part.chunk_first = offset
        if result.first_offset is None:
            result.first_offset = offset
        result.last_offset = offset
        result.records += 1
        result.bytes += (len(value) if value else 0) + (len(key_bytes) if key_bytes else 0)
        part.since_checkpoint += 1


def _produce(producer: Producer, topic: str, key, value, headers, partition: int, timestamp: int, callback) -> None:
    refreshed = False
    while True:
        try:
            producer.produce(topic, value=value, key=key, headers=headers, partition=partition,
                             timestamp=timestamp, on_delivery=callback)
            return
        except BufferError:
            producer.poll(0.05)
        except KafkaException as exc:
            # A destination partition added since this producer last refreshed its metadata (a source
            # partition increase propagated by the planner): refresh once, then retry.
            if exc.args[0].code() != KafkaError._UNKNOWN_PARTITION or refreshed:
                raise CopyError(f"producing to {topic}-{partition}: {exc.args[0].str()}") from None
            producer.list_topics(topic, timeout=10)
            refreshed = True


def _checkpoint(clients: _Clients, parts: list[_Partition], final: bool) -> None:
    """Make every copy so far durable, then record it for each partition that moved: destination
    progress, offset sync, and the flow's consumer group on the source (for lag tools only, so it is
    committed without waiting except at the end: a commit queues behind the consumer's pending fetch).

    The destination high watermark after the flush bounds every later copy from below, so it is
    the checkpoint's search start; the previous one bounds this chunk's first copy, which makes
    the offset-sync pair (source offset, destination offset to scan from)."""
    moved = [p for p in parts if p.position > p.recorded]
    if not moved:
        return
    _flush(clients, moved[0].task)
    producer = clients.producer
    for p in moved:
        task, result = p.task, p.result
        key = progress_key(task.flow, task.topic, task.partition)
        dest_next = _dest_end(task, clients)
        producer.produce(PROGRESS, key=key, value=Checkpoint(p.position, task.dest_topic, dest_next).to_json())
        if p.chunk_first is not None:
            producer.produce(OFFSET_SYNCS, key=key, value=json.dumps({
                "source": p.chunk_first, "dest": result.dest_watermarks[-1], "dest_topic": task.dest_topic}).encode())
        result.dest_watermarks.append(dest_next)
    _flush(clients, moved[0].task)
    clients.consumer.commit(offsets=[TopicPartition(p.task.topic, p.task.partition, p.position) for p in moved],
                            asynchronous=not final)
    for p in moved:
        p.result.next = p.recorded = p.position
        p.result.checkpoints.append(p.position)
        p.chunk_first, p.since_checkpoint = None, 0


def _dest_end(task: CopyTask, clients: _Clients) -> int:
    tp = TopicPartition(task.dest_topic, task.partition)
    try:
        return clients.target.get_watermark_offsets(tp, timeout=30)[1]
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError._UNKNOWN_PARTITION:
            raise
        clients.target.list_topics(task.dest_topic, timeout=10)  # a partition added since the last refresh
        return clients.target.get_watermark_offsets(tp, timeout=30)[1]


def _flush(clients: _Clients, task: CopyTask) -> None:
    remaining = clients.producer.flush(120)
    if remaining:
        raise CopyError(f"target {task.target_cluster} did not acknowledge {remaining} records within 120 s")
    if clients.errors:
        raise CopyError(f"writing to {task.target_cluster}: {clients.errors[0].str()}")
