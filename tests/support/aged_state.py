"""A flow's internal state as a month of running leaves it, made in seconds: the `_kdr.progress` and
`_kdr.checkpoints` records a continuous replicator would have written into its target, dated over the past `days`,
then the flow's current records written again on top, so that every key's newest value is what it was before.

What the replicator writes, per epoch (5 s): a progress record per source partition that moved and an owner record
per second (its claim); per checkpoint pass: the checkpoints that moved (`moving` of the groups), all of them every
`full_every` passes (FULL_PASS_S), the flow's members when they changed, the pass record and a lag snapshot. The
history's offsets climb to the current ones. Unlike the replicator, the generator writes without transactions, so
the topics hold no transaction markers."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Producer

from kafka_dr.replication.internal import CHECKPOINTS, PROGRESS, owner_key, read_records
from kafka_dr.translation.checkpoints import members_digest, members_key

DAY_MS = 24 * 3600 * 1000
OWNER_RECORDS_PER_EPOCH = 5  # a claim a second, 5 s epochs
Put = Callable[[str, bytes, Any, int], None]  # topic, key, value, timestamp (ms)


@dataclass(frozen=True)
class Aged:
    progress_records: int
    checkpoint_records: int
    seconds: float


def current(config: dict[str, Any], topic: str, flow: str) -> dict[bytes, bytes | None]:
    """The newest value of each of the flow's keys in an internal topic, in the order they were last written."""
    latest: dict[bytes, bytes | None] = {}
    for message in read_records(config, topic):
        key = message.key() or b""
        if key == flow.encode() or key.startswith(f"{flow}/".encode()):
            latest.pop(key, None)
            latest[key] = message.value()
    return latest


def age_flow(
    config: dict[str, Any],
    flow: str,
    epochs: int = 20_000,
    passes: int = 2_000,
    moving: float = 0.05,
    full_every: int = 120,
    days: float = 30,
    seed: int = 7,
) -> Aged:
    """Write the history of `flow` into its target (`config`): `epochs` progress epochs and `passes` checkpoint
    passes spread evenly over the `days` before now, then the flow's current records again."""
    started = time.perf_counter()
    progress_now, checkpoints_now = current(config, PROGRESS, flow), current(config, CHECKPOINTS, flow)
    now_ms = int(time.time() * 1000)
    first_ms = now_ms - int(days * DAY_MS)
    producer = Producer(
        {**config, "acks": "all", "linger.ms": 50, "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000}
    )

    def put(topic: str, key: bytes, value: Any, at_ms: int) -> None:
        encoded = value if value is None or isinstance(value, bytes) else json.dumps(value).encode()
        while True:
            try:
                producer.produce(topic, encoded, key, timestamp=at_ms)
                return
            except BufferError:
                producer.poll(0.1)

    progress = sum(1 for _ in _progress_history(put, flow, progress_now, epochs, first_ms, now_ms))
    checkpoint_history = _checkpoint_history(
        put, flow, checkpoints_now, progress_now, passes, moving, full_every, first_ms, now_ms, random.Random(seed)
    )
    checkpoints = sum(1 for _ in checkpoint_history)
    for topic, latest in ((PROGRESS, progress_now), (CHECKPOINTS, checkpoints_now)):
        for key, value in latest.items():
            put(topic, key, value, now_ms)
    if owner_key(flow) not in progress_now:
        put(PROGRESS, owner_key(flow), None, now_ms)  # the history's claims leave no owner behind
    assert producer.flush(300) == 0, "the aged state was not all acknowledged"
    return Aged(progress, checkpoints, round(time.perf_counter() - started, 1))


def _progress_history(
    put: Put, flow: str, now: dict[bytes, bytes | None], epochs: int, first_ms: int, last_ms: int
) -> Iterator[bytes]:
    partitions = {key: json.loads(value) for key, value in now.items() if value and b"next" in value}
    owner = {"host": "aged-state", "pid": 1, "started_at": first_ms / 1000}
    step = (last_ms - first_ms) / epochs
    for epoch in range(epochs):
        at_ms = int(first_ms + epoch * step)
        share = epoch / epochs
        for key, value in partitions.items():
            moved = {"next": int(value["next"] * share), "dest_next": int(value["dest_next"] * share)}
            put(PROGRESS, key, {**value, **moved}, at_ms)
            yield key
        for second in range(OWNER_RECORDS_PER_EPOCH):
            put(PROGRESS, owner_key(flow), owner, at_ms + second * 1000)
            yield owner_key(flow)


def _checkpoint_history(
    put: Put,
    flow: str,
    now: dict[bytes, bytes | None],
    progress_now: dict[bytes, bytes | None],
    passes: int,
    moving: float,
    full_every: int,
    first_ms: int,
    last_ms: int,
    rng: random.Random,
) -> Iterator[bytes]:
    checkpoints = {key: json.loads(value) for key, value in now.items() if value and b'"group"' in value}
    by_group: dict[str, list[bytes]] = {}
    for key, value in checkpoints.items():
        by_group.setdefault(value["group"], []).append(key)
    groups = sorted(by_group)
    digest = members_digest(groups)
    lag = progress_now.get(f"{flow}/__lag__".encode())
    step = (last_ms - first_ms) / passes
    for n in range(passes):
        at_ms = int(first_ms + n * step)
        share = n / passes
        chosen = groups if n % full_every == 0 else rng.sample(groups, max(1, int(len(groups) * moving)))
        for group in chosen:
            for key in by_group[group]:
                value = checkpoints[key]
                moved = {
                    "source_offset": int(value["source_offset"] * share),
                    "dest_offset": int(value["dest_offset"] * share),
                }
                put(CHECKPOINTS, key, {**value, **moved, "at_ms": at_ms}, at_ms)
                yield key
        if n == 0:
            put(CHECKPOINTS, members_key(flow), {"at_ms": at_ms, "digest": digest, "groups": groups}, at_ms)
            yield members_key(flow)
        written = sum(len(by_group[g]) for g in chosen)
        pass_record = {"at_ms": at_ms, "groups": len(groups), "written": written, "members": digest}
        put(CHECKPOINTS, flow.encode(), pass_record, at_ms)
        yield flow.encode()
        if lag is not None:
            put(PROGRESS, f"{flow}/__lag__".encode(), lag, at_ms)
