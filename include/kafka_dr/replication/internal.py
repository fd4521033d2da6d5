"""Internal topics of kafka-dr, prefixed `_kdr.` and never replicated as data (their names: kafka_dr.wire).

They live in the target cluster of a flow, so that they survive the loss of the source:
- `_kdr.progress`: per flow and source partition, the next source offset copied and the
  destination offset reached (compacted; it only bounds the resume search, resume.py), and each
  replicator driver's claim on its flow;
- `_kdr.checkpoints`: translated consumer-group offsets (written by offset translation);
- `_kdr.heartbeats`: heartbeat records; the one internal topic a flow copies, so that the
  end-to-end latency can be measured from the provenance of the copies;
- `_kdr.control`: stop requests for a flow's replicator, from any process on any host (control.py);
- `_kdr.health`: the samples of dr_replication_health, one per flow and source partition per run (a week
  kept), from which each run's evaluation window is read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from ..clients import end_offsets, offsets_of, read_committed, start_offset, wait_for_leaders
from ..wire import CHECKPOINTS_TOPIC as CHECKPOINTS
from ..wire import CONTROL_TOPIC as CONTROL
from ..wire import HEALTH_TOPIC as HEALTH
from ..wire import HEARTBEATS_TOPIC as HEARTBEATS
from ..wire import PROGRESS_TOPIC as PROGRESS

# The compacted topics take a record every second or so for as long as a flow runs (claims, progress, checkpoints
# that moved); a reader wants the last value per key. Kafka compacts only closed segments and only once the dirty part
# reaches min.cleanable.dirty.ratio of the log: an hour-long segment and a 10% ratio keep each topic near its number
# of keys (within 10%, plus the last hour), where Kafka's defaults (7-day segments, 50%) would let it grow for a week.
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.ms": str(3600 * 1000),
    "segment.bytes": str(64 * 1024 * 1024),
    "min.cleanable.dirty.ratio": "0.1",
}
TOPIC_CONFIGS = {
    PROGRESS: COMPACTED,
    CHECKPOINTS: COMPACTED,
    HEARTBEATS: {"retention.ms": str(24 * 3600 * 1000)},
    HEALTH: {"retention.ms": str(7 * 24 * 3600 * 1000)},  # a week of samples: the windows and RPO history
    CONTROL: {"retention.ms": str(24 * 3600 * 1000)},  # a request matters while a stop takes: a day is plenty
}


def owner_key(flow: str) -> bytes:
    """The `_kdr.progress` key of the flow's claim record: which replicator driver runs the flow now."""
    return f"{flow}/__owner__".encode()


def partition_key(flow: str, topic: str, partition: int) -> bytes:
    """The key of a flow's per-source-partition records (progress in `_kdr.progress`, samples in `_kdr.health`)."""
    return f"{flow}/{topic}/{partition}".encode()


def start_key(flow: str) -> bytes:
    """`_kdr.progress` key of the marker saying a new flow's `start` was applied."""
    return f"{flow}/__start__".encode()


def ensure_internal_topics(
    admin: AdminClient, topics: tuple[str, ...] = tuple(TOPIC_CONFIGS), timeout: float = 15.0
) -> list[str]:
    """Create the missing internal topics (one partition each); returns the ones created."""
    existing = admin.list_topics(timeout=timeout).topics
    missing = [t for t in topics if t not in existing]
    if not missing:
        return []
    futures = admin.create_topics([NewTopic(t, 1, config=TOPIC_CONFIGS[t]) for t in missing], operation_timeout=timeout)
    created = []
    for topic, future in futures.items():
        try:
            future.result(timeout)
            created.append(topic)
        except Exception as exc:  # noqa: BLE001 - a concurrent creator is fine, anything else is not
            if "already exists" not in str(exc).lower():
                raise
    wait_for_leaders(admin, missing, timeout)
    return created


def put_records(config: dict[str, Any], topic: str, records: list[tuple[bytes, Any]], timeout: float = 10.0) -> None:
    """Write keyed JSON records (None: a tombstone) to an internal topic, creating it if missing, and wait for
    every acknowledgement."""
    ensure_internal_topics(AdminClient(config), (topic,), timeout=timeout)
    put_many(config, [(topic, key, value) for key, value in records], timeout)


def internal_writer(config: dict[str, Any], timeout: float = 10.0) -> Producer:
    """The producer `put_many` writes with. Not idempotent: internal records are last-value-wins, harmless to
    duplicate, and a new idempotent producer waits about half a second for its producer id. librdkafka connects as
    it is made, so a caller that makes it early writes without waiting for the connection."""
    return Producer({**config, "acks": "all", "linger.ms": 5, "message.timeout.ms": int(timeout * 1000)})


def put_many(
    config: dict[str, Any],
    records: list[tuple[str, bytes, Any]],
    timeout: float = 10.0,
    writer: Producer | None = None,
) -> None:
    """Write (topic, key, JSON value) records to internal topics that exist, with one producer (`writer`, else a
    new `internal_writer`), and wait for every acknowledgement."""
    errors: list[KafkaError] = []
    producer = writer or internal_writer(config, timeout)
    for topic, key, value in records:
        encoded = None if value is None else json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
        while True:
            try:
                producer.produce(
                    topic,
                    key=key,
                    value=encoded,
                    on_delivery=lambda err, _msg: errors.append(err) if err is not None else None,
                )
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(timeout):
        topics = ", ".join(sorted({topic for topic, _, _ in records}))
        raise KafkaException(
            KafkaError(KafkaError._TIMED_OUT, f"records not acknowledged by {topics} in {timeout:g} s")
        )
    if errors:
        raise KafkaException(errors[0])


def read_records(config: dict[str, Any], topic: str, timeout: float = 10.0) -> Iterator[Message]:
    """Every committed record of an internal topic, up to its end now; nothing if the topic does not exist."""
    admin = AdminClient(config)
    meta = admin.list_topics(timeout=timeout).topics.get(topic)
    if meta is None or meta.error is not None or not meta.partitions:
        return
    partitions = [(topic, p) for p in meta.partitions]
    starts = offsets_of(admin, partitions, OffsetSpec.earliest(), timeout=timeout)
    ends = end_offsets(admin, partitions, IsolationLevel.READ_COMMITTED, timeout)
    yield from read_committed(config, {key: (starts[key], ends[key]) for key in partitions}, timeout)


def latest_value(config: dict[str, Any], topic: str, key: bytes, timeout: float = 10.0) -> bytes | None:
    """The last value written for `key` in a compacted internal topic (None: never written, or deleted)."""
    value = None
    for message in read_records(config, topic, timeout):
        if message.key() == key:
            value = message.value()
    return value


def newest_value(config: dict[str, Any], topic: str, key: bytes, timeout: float = 10.0) -> bytes | None:
    """The newest value written for `key` in a one-partition internal topic, read back from the end in widening
    spans rather than whole (None: never written, deleted, or no such topic): for a key written often (`_kdr.health`'s
    evaluations, a flow's claims and lag snapshots), whose newest record is near the end however old the topic."""
    admin = AdminClient(config)
    # Every topic's metadata, not the one topic's: that request would create it where topics are auto-created.
    meta = admin.list_topics(timeout=timeout).topics.get(topic)
    if meta is None or meta.error is not None:
        return None
    start = start_offset(admin, topic, 0, timeout)
    end = end_offsets(admin, [(topic, 0)], IsolationLevel.READ_COMMITTED, timeout)[(topic, 0)]
    span = 64
    while True:
        first = max(start, end - span)
        value, found = None, False
        for message in read_committed(config, {(topic, 0): (first, end)}, timeout):
            if message.key() == key:
                value, found = message.value(), True
        if found or first == start:
            return value
        end, span = first, span * 4
