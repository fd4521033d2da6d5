"""A flow's internal state as a month of running leaves it, made in seconds: the `_kdr.progress` and
`_kdr.checkpoints` records a continuous replicator would have written into its target, dated over the `days` before
now. Written before the flow's current state (what a test or benchmark then sets up on top), as a month precedes
today: Kafka rolls a segment when a record's timestamp is segment.ms past the segment's first, so history appended
after newer records would never roll, nor be compacted.

What the replicator writes, per epoch (5 s): a progress record per source partition that moved and an owner record
per second (its claim); per checkpoint pass: the checkpoints that moved (`moving` of the groups), all of them every
`full_every` passes (FULL_PASS_S), the flow's members when they changed, the pass record and a lag snapshot. The
history's last records say the replicator ended and leave no progress behind (tombstones), so the current state
starts the flow as a fresh one would; what differs is what the topics hold. Unlike the replicator, the generator
writes without transactions, so the topics hold no transaction markers."""

from __future__ import annotations

import heapq
import json
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from kafka_dr.replication.internal import (
    CHECKPOINTS,
    COMPACTED,
    PROGRESS,
    ensure_internal_topics,
    owner_key,
    partition_key,
)
from kafka_dr.translation.checkpoints import checkpoint_key, members_digest, members_key

DAY_MS = 24 * 3600 * 1000
OWNER_RECORDS_PER_EPOCH = 5  # a claim a second, 5 s epochs
SEGMENT_MS = int(COMPACTED["segment.ms"])
Event = tuple[int, str, bytes, Any]  # timestamp (ms), topic, key, value (None: a tombstone)


@dataclass(frozen=True)
class Aged:
    progress_records: int
    checkpoint_records: int
    seconds: float


def age_flow(
    config: dict[str, Any],
    flow: str,
    topic: str,
    partitions: int,
    groups: list[str],
    epochs: int = 20_000,
    passes: int = 2_000,
    moving: float = 0.05,
    full_every: int = 120,
    days: float = 30,
    seed: int = 7,
) -> Aged:
    """Write `epochs` progress epochs and `passes` checkpoint passes of `flow` (over `topic`'s `partitions`, the
    `groups`) into its target (`config`), spread evenly over the `days` before now; the internal topics are created
    as kafka-dr creates them when missing."""
    started = time.perf_counter()
    ensure_internal_topics(AdminClient(config), (PROGRESS, CHECKPOINTS))
    now_ms = int(time.time() * 1000)
    first_ms = now_ms - int(days * DAY_MS)
    producer = Producer(
        {**config, "acks": "all", "linger.ms": 50, "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000}
    )

    keys = [partition_key(flow, topic, p) for p in range(partitions)]
    rng = random.Random(seed)
    events = heapq.merge(  # in time order, as the replicator writes them: both topics' segments roll by the hour
        _progress_history(flow, topic, keys, epochs, first_ms, now_ms),
        _checkpoint_history(flow, topic, partitions, groups, passes, moving, full_every, first_ms, now_ms, rng),
        key=lambda event: event[0],
    )
    written, flushed_at = {PROGRESS: 0, CHECKPOINTS: 0}, first_ms
    for at_ms, into, key, value in events:
        # The replicator's batches hold a second or so of records; a batch spanning hours would make a segment of its
        # own (segments roll between batches) and keep hours of history in the active segment.
        if at_ms - flushed_at >= SEGMENT_MS:
            producer.flush(60)
            flushed_at = at_ms
        encoded = None if value is None else json.dumps(value).encode()
        while True:
            try:
                producer.produce(into, encoded, key, timestamp=at_ms)
                break
            except BufferError:
                producer.poll(0.1)
        written[into] += 1
    assert producer.flush(300) == 0, "the aged state was not all acknowledged"
    return Aged(written[PROGRESS], written[CHECKPOINTS], round(time.perf_counter() - started, 1))


def _progress_history(
    flow: str, topic: str, keys: list[bytes], epochs: int, first_ms: int, last_ms: int
) -> Iterator[Event]:
    owner = {"host": "aged-state", "pid": 1, "started_at": first_ms / 1000}
    step = (last_ms - first_ms) / epochs
    for epoch in range(epochs):
        at_ms = int(first_ms + epoch * step)
        for partition, key in enumerate(keys):
            yield at_ms, PROGRESS, key, {"next": epoch, "dest_topic": topic, "dest_next": epoch + partition}
        for second in range(OWNER_RECORDS_PER_EPOCH):
            yield at_ms + second * 1000, PROGRESS, owner_key(flow), owner
    yield last_ms, PROGRESS, owner_key(flow), {**owner, "ended_at_ms": last_ms, "reason": "stopped", "request": None}
    for key in keys:  # the flow starts afresh on top of its history
        yield last_ms, PROGRESS, key, None


def _checkpoint_history(
    flow: str,
    topic: str,
    partitions: int,
    groups: list[str],
    passes: int,
    moving: float,
    full_every: int,
    first_ms: int,
    last_ms: int,
    rng: random.Random,
) -> Iterator[Event]:
    digest = members_digest(groups)
    step = (last_ms - first_ms) / passes
    lag = {"flow": flow, "source": "history", "target": "history", "heartbeat_latency_s": None, "partitions": []}
    lag |= {"total_records": 0, "max_records": 0, "max_seconds": 0}
    for n in range(passes):
        at_ms = int(first_ms + n * step)
        chosen = groups if n % full_every == 0 else rng.sample(groups, max(1, int(len(groups) * moving)))
        for group in chosen:
            for partition in range(partitions):
                offset = n * 10 + partition
                value = {"topic": topic, "partition": partition, "source_offset": offset, "dest_topic": topic}
                value |= {"dest_offset": offset, "method": "provenance", "group": group, "at_ms": at_ms}
                yield at_ms, CHECKPOINTS, checkpoint_key(flow, group, topic, partition), value
        if n == 0:
            yield at_ms, CHECKPOINTS, members_key(flow), {"at_ms": at_ms, "digest": digest, "groups": groups}
        written = len(chosen) * partitions
        pass_record = {"at_ms": at_ms, "groups": len(groups), "written": written, "members": digest}
        yield at_ms, CHECKPOINTS, flow.encode(), pass_record
        yield at_ms, PROGRESS, f"{flow}/__lag__".encode(), {**lag, "measured_at_ms": at_ms}
