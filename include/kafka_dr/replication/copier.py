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
from .provenance import HEADER, ForceCopy, Hop, blocked, hops
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
    dest_first: int | None = None
    dest_last: int | None = None
    seconds: float = 0.0
    checkpoints: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_CLIENTS: dict[str, tuple[Consumer, Producer]] = {}


def _clients(task: CopyTask) -> tuple[Consumer, Producer]:
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
            "batch.size": 1_000_000, "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 500_000, "queue.buffering.max.kbytes": 1_048_576,
        })
        _CLIENTS[key] = (consumer, producer)
    return _CLIENTS[key]


def close_clients() -> None:
    """Close the cached clients (in-process callers; Spark workers simply exit)."""
    while _CLIENTS:
        consumer, producer = _CLIENTS.popitem()[1]
        consumer.close()
        producer.flush(5)


def copy_range(task: CopyTask) -> CopyResult:
    consumer, producer = _clients(task)
    result = CopyResult(task.topic, task.partition, task.dest_topic, task.start, task.start)
    started = time.monotonic()
    if task.end <= task.start:
        return result
    errors: list[KafkaError] = []

    def delivered(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            errors.append(err)
            return
        dest = msg.offset()
        result.dest_last = dest if result.dest_last is None else max(result.dest_last, dest)
        result.dest_first = dest if result.dest_first is None else min(result.dest_first, dest)

    def first_of_chunk(source_offset: int):
        """Delivery callback of a chunk's first copy: also records the offset sync pair."""
        def callback(err: KafkaError | None, msg: Any) -> None:
            delivered(err, msg)
            if err is None:
                chunk_first.append((source_offset, msg.offset()))
        return callback

    chunk_first: list[tuple[int, int]] = []
    tp = TopicPartition(task.topic, task.partition, task.start)
    consumer.assign([tp])
    position = task.start
    since_checkpoint = 0
    last_data = time.monotonic()
    try:
        while position < task.end:
            messages = next_batch(consumer)
            if not messages:
                if time.monotonic() - last_data > STALL_TIMEOUT_S:
                    raise CopyError(f"source {task.source_cluster} unreachable: no data for {STALL_TIMEOUT_S:.0f}s "
                                    f"while copying {task.topic}-{task.partition} at offset {position}")
                continue
            last_data = time.monotonic()
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        position = max(position, min(message.offset(), task.end))
                        continue
                    raise CopyError(f"reading {task.source_cluster}:{task.topic}-{task.partition} at {position}: "
                                    f"{error.str()}")
                offset = message.offset()
                if offset >= task.end:
                    position = task.end
                    break
                position = offset + 1
                headers = message.headers() or []
                timestamp = message.timestamp()[1]
                try:
                    chain = hops(headers)
                except ValueError as exc:
                    raise CopyError(f"{task.source_cluster}:{task.topic}-{task.partition} offset {offset}: {exc}") \
                        from None
                if blocked(chain, task.target_cluster_id, task.dest_topic, timestamp, task.force) or (
                        task.from_ms is not None and timestamp < task.from_ms) or (
                        task.to_ms is not None and timestamp >= task.to_ms):
                    result.filtered += 1
                    continue
                if task.provenance:
                    headers = [*headers, (HEADER, Hop(task.source_cluster_id, task.topic, task.partition, offset,
                                                      int(time.time() * 1000)).encode())]
                callback = first_of_chunk(offset) if since_checkpoint == 0 else delivered
                _produce(producer, task.dest_topic, message.key(), message.value(), headers, task.partition,
                         timestamp, callback)
                if result.first_offset is None:
                    result.first_offset = offset
                result.last_offset = offset
                result.records += 1
                result.bytes += len(message.value() or b"") + len(message.key() or b"")
                since_checkpoint += 1
            if since_checkpoint >= task.checkpoint_every:
                _checkpoint(task, consumer, producer, result, position, errors, chunk_first)
                since_checkpoint = 0
        _checkpoint(task, consumer, producer, result, position, errors, chunk_first)
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


def _checkpoint(task: CopyTask, consumer: Consumer, producer: Producer, result: CopyResult, position: int,
                errors: list[KafkaError], chunk_first: list[tuple[int, int]]) -> None:
    """Make everything up to `position` durable, then record it: destination progress, offset sync,
    and the flow's consumer group on the source."""
    _flush(producer, task, errors)
    key = progress_key(task.flow, task.topic, task.partition)
    if result.dest_last is not None:  # with no copy yet, the resume scan needs no bound
        producer.produce(PROGRESS, key=key,
                         value=Checkpoint(position, task.dest_topic, result.dest_last + 1).to_json())
    for source_offset, dest_offset in chunk_first:
        producer.produce(OFFSET_SYNCS, key=key, value=json.dumps({"source": source_offset, "dest": dest_offset,
                                                                  "dest_topic": task.dest_topic}).encode())
    chunk_first.clear()
    _flush(producer, task, errors)
    consumer.commit(offsets=[TopicPartition(task.topic, task.partition, position)], asynchronous=False)
    result.next = position
    result.checkpoints.append(position)


def _flush(producer: Producer, task: CopyTask, errors: list[KafkaError]) -> None:
    remaining = producer.flush(120)
    if remaining:
        raise CopyError(f"target {task.target_cluster} did not acknowledge {remaining} records within 120 s")
    if errors:
        raise CopyError(f"writing to {task.target_cluster}:{task.dest_topic}-{task.partition}: {errors[0].str()}")
