"""Copy one planned offset range of a source partition into the destination (runs in a Spark task).

Keys, values (null included), headers and the CreateTime timestamp are copied unchanged into the
same partition, with one provenance hop appended; records that the cycle rule blocks, or that
fall outside a requested time range, are counted as filtered. The source is read with
read_committed, so aborted records and transaction markers are never copied.

No gap, no duplicate, without a coordinator: the producer is idempotent and keeps order, so after
any crash the destination holds a prefix of what this task sent, and the next run resumes from
the destination (resume.py). Progress (`_kdr.progress`, offset syncs, the source consumer group
named after the flow) is written only after the copies it covers are acknowledged.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

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
    end: int  # exclusive; at most the read_committed end offset when planned
    provenance: bool = True
    force: ForceCopy | None = None
    from_ms: int | None = None  # copy only records with from_ms <= timestamp < to_ms
    to_ms: int | None = None
    checkpoint_every: int = 50_000
    record_progress: bool = True  # False: flush only; continuous mode records progress about once a second


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


def _clients(task: CopyTask) -> _Clients:
    """Clients cached per Python worker and flow: continuous micro-batches reuse their connections."""
    key = json.dumps([task.flow, task.source_config, task.target_config], sort_keys=True, default=str)
    if key not in _CLIENTS:
        consumer = Consumer({
            **task.source_config, "group.id": task.flow, "enable.auto.commit": False,
            "enable.auto.offset.store": False, "isolation.level": "read_committed",
            "enable.partition.eof": True, "auto.offset.reset": "error",
            "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760,
            "queued.max.messages.kbytes": 262_144, "fetch.wait.max.ms": 100,
        })
        producer = Producer({
            **task.target_config, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
            "batch.size": 1_000_000, "batch.num.messages": 10_000, "delivery.report.only.error": True,
            "queue.buffering.max.messages": 500_000, "queue.buffering.max.kbytes": 1_048_576,
        })
        target = Consumer({**task.target_config, "group.id": f"{task.flow}-watermarks"})
        _CLIENTS[key] = _Clients(consumer, producer, target)
    return _CLIENTS[key]


def close_clients() -> None:
    """Close the cached clients (in-process callers; Spark workers simply exit)."""
    while _CLIENTS:
        clients = _CLIENTS.popitem()[1]
        clients.consumer.close()
        clients.target.close()
        clients.producer.flush(5)


def copy_range(task: CopyTask) -> CopyResult:
    clients = _clients(task)
    consumer, producer = clients.consumer, clients.producer
    result = CopyResult(task.topic, task.partition, task.dest_topic, task.start, task.start)
    started = time.monotonic()
    if task.end <= task.start:
        return result
    clients.errors.clear()
    result.dest_watermarks.append(_dest_end(task, clients))
    consumer.assign([TopicPartition(task.topic, task.partition, task.start)])
    prefix = hop_prefix(task.source_cluster_id, task.topic, task.partition)
    dest_topic, partition, end = task.dest_topic, task.partition, task.end
    check_time = task.from_ms is not None or task.to_ms is not None
    chunk_first: int | None = None  # source offset of the first copy since the last checkpoint
    position = task.start
    since_checkpoint = 0
    last_data = time.monotonic()
    try:
        while position < end:
            messages = next_batch(consumer)
            if not messages:
                if time.monotonic() - last_data > STALL_TIMEOUT_S:
                    raise CopyError(f"source {task.source_cluster} unreachable: no data for {STALL_TIMEOUT_S:.0f}s "
                                    f"while copying {task.topic}-{partition} at offset {position}")
                continue
            last_data = time.monotonic()
            copied_at = b",%d" % int(time.time() * 1000)  # one copy time per fetched batch
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        position = max(position, min(message.offset(), end))
                        continue
                    raise CopyError(f"reading {task.source_cluster}:{task.topic}-{partition} at {position}: "
                                    f"{error.str()}")
                offset = message.offset()
                if offset >= end:
                    position = end
                    break
                position = offset + 1
                headers = message.headers() or []
                timestamp = message.timestamp()[1]
                if headers:
                    try:
                        chain = hops(headers)
                    except ValueError as exc:
                        raise CopyError(f"{task.source_cluster}:{task.topic}-{partition} offset {offset}: {exc}") \
                            from None
                    if chain and blocked(chain, task.target_cluster_id, dest_topic, timestamp, task.force):
                        result.filtered += 1
                        continue
                if check_time and ((task.from_ms is not None and timestamp < task.from_ms)
                                   or (task.to_ms is not None and timestamp >= task.to_ms)):
                    result.filtered += 1
                    continue
                if task.provenance:
                    headers.append((HEADER, prefix + b"%d" % offset + copied_at))
                value, key = message.value(), message.key()
                _produce(producer, dest_topic, key, value, headers, partition, timestamp, clients.failed)
                if chunk_first is None:
                    chunk_first = offset
                if result.first_offset is None:
                    result.first_offset = offset
                result.last_offset = offset
                result.records += 1
                result.bytes += (len(value) if value else 0) + (len(key) if key else 0)
                since_checkpoint += 1
            if since_checkpoint >= task.checkpoint_every:
                _checkpoint(task, clients, result, position, chunk_first)
                since_checkpoint, chunk_first = 0, None
        _checkpoint(task, clients, result, position, chunk_first)
    finally:
        consumer.unassign()
    result.seconds = round(time.monotonic() - started, 3)
    return result


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


def _checkpoint(task: CopyTask, clients: _Clients, result: CopyResult, position: int,
                chunk_first: int | None) -> None:
    """Make everything up to `position` durable, then record it: destination progress, offset sync,
    and the flow's consumer group on the source.

    The destination high watermark after the flush bounds every later copy from below, so it is
    the checkpoint's search start; the previous one bounds this chunk's first copy, which makes
    the offset-sync pair (source offset, destination offset to scan from)."""
    _flush(task, clients)
    result.next = position
    if not task.record_progress:
        return  # acknowledged; the next micro-batch continues from `position`, progress is recorded later
    key = progress_key(task.flow, task.topic, task.partition)
    dest_next = _dest_end(task, clients)
    producer = clients.producer
    producer.produce(PROGRESS, key=key, value=Checkpoint(position, task.dest_topic, dest_next).to_json())
    if chunk_first is not None:
        producer.produce(OFFSET_SYNCS, key=key, value=json.dumps({
            "source": chunk_first, "dest": result.dest_watermarks[-1], "dest_topic": task.dest_topic}).encode())
    _flush(task, clients)
    clients.consumer.commit(offsets=[TopicPartition(task.topic, task.partition, position)], asynchronous=False)
    result.checkpoints.append(position)
    result.dest_watermarks.append(dest_next)


def _dest_end(task: CopyTask, clients: _Clients) -> int:
    tp = TopicPartition(task.dest_topic, task.partition)
    try:
        return clients.target.get_watermark_offsets(tp, timeout=30)[1]
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError._UNKNOWN_PARTITION:
            raise
        clients.target.list_topics(task.dest_topic, timeout=10)  # a partition added since the last refresh
        return clients.target.get_watermark_offsets(tp, timeout=30)[1]


def _flush(task: CopyTask, clients: _Clients) -> None:
    remaining = clients.producer.flush(120)
    if remaining:
        raise CopyError(f"target {task.target_cluster} did not acknowledge {remaining} records within 120 s")
    if clients.errors:
        raise CopyError(f"writing to {task.target_cluster}:{task.dest_topic}-{task.partition}: "
                        f"{clients.errors[0].str()}")
