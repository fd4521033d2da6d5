"""Compare a flow's destination with its source, partition by partition: what a DR drill trusts.

For each source partition, every committed source record that the cycle rule lets through must
appear in the destination exactly once (found by the last provenance hop), with the same key,
value, headers and timestamp. Reported per partition: expected, copied, missing, duplicated,
mismatched, filtered (blocked by the cycle rule) and skipped (ranges a failback moved the flow past
on purpose). With a replicator running, records it has not copied yet are read again until
`settle_s` has passed before they count as missing.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from ..clients import read_partition
from .provenance import HEADER, ForceCopy, blocked, hops

EXAMPLES = 5  # offsets listed per problem kind


@dataclass(frozen=True)
class VerifyTask:
    source_config: dict[str, Any]
    target_config: dict[str, Any]
    source_cluster_id: str
    target_cluster_id: str
    topic: str
    partition: int
    dest_topic: str
    end: int  # source read_committed end offset when planned: later records are not judged
    force: ForceCopy | None = None  # the filter override the flow was copied with
    skipped: tuple[tuple[int, int], ...] = ()  # inclusive source ranges not to be copied
    settle_s: float = 0.0
    start: int = 0  # first source offset judged (a backfill's window)


@dataclass
class VerifyResult:
    topic: str
    partition: int
    dest_topic: str
    expected: int = 0
    copied: int = 0
    filtered: int = 0
    skipped: int = 0
    missing: int = 0
    duplicated: int = 0
    mismatched: int = 0
    examples: dict[str, list[int]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.duplicated or self.mismatched)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def _read(config: dict[str, Any], topic: str, partition: int, isolation: str, end: int | None = None, start: int = 0):
    consumer = Consumer(
        {
            **config,
            "group.id": "kdr-verify",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=15)
        stop = high if end is None else min(end, high)
        first = max(low, start)
        if stop > first:
            yield from read_partition(consumer, topic, partition, first if start else OFFSET_BEGINNING, stop, 30)
    finally:
        consumer.close()


def verify_partition(task: VerifyTask) -> VerifyResult:
    result = VerifyResult(task.topic, task.partition, task.dest_topic)
    source: dict[int, tuple] = {}
    for m in _read(task.source_config, task.topic, task.partition, "read_committed", task.end, task.start):
        if any(first <= m.offset() <= last for first, last in task.skipped):
            result.skipped += 1
            continue
        headers = m.headers() or []
        if blocked(hops(headers), task.target_cluster_id, task.dest_topic, m.timestamp()[1], task.force):
            result.filtered += 1
            continue
        source[m.offset()] = (m.key(), m.value(), headers, m.timestamp()[1])
    result.expected = len(source)
    deadline = time.monotonic() + task.settle_s
    while True:
        seen, mismatched = _copies(task, source)
        missing = sorted(set(source) - set(seen))
        if not missing or time.monotonic() >= deadline:
            break
        time.sleep(1.0)  # a running replicator copies them meanwhile
    result.copied = sum(1 for offset in seen if offset in source)
    duplicated = sorted(offset for offset, n in seen.items() if n > 1)
    result.missing, result.duplicated = len(missing), sum(seen[o] - 1 for o in duplicated)
    result.mismatched = len(mismatched)
    for kind, offsets in (("missing", missing), ("duplicated", duplicated), ("mismatched", mismatched)):
        if offsets:
            result.examples[kind] = offsets[:EXAMPLES]
    return result


def _copies(task: VerifyTask, source: dict[int, tuple]) -> tuple[dict[int, int], list[int]]:
    """How often each source offset is in the destination, and the copies that differ from their original."""
    seen: dict[int, int] = {}
    mismatched = []
    origin = (task.source_cluster_id, task.topic, task.partition)
    for m in _read(task.target_config, task.dest_topic, task.partition, "read_committed"):
        headers = m.headers() or []
        chain = hops(headers)
        if not chain or (chain[-1].cluster_id, chain[-1].topic, chain[-1].partition) != origin:
            continue
        offset = chain[-1].offset
        seen[offset] = seen.get(offset, 0) + 1
        original = source.get(offset)
        if original is not None and (m.key(), m.value(), _without_last_hop(headers), m.timestamp()[1]) != original:
            mismatched.append(offset)
    return seen, mismatched


def _without_last_hop(headers: list[tuple[str, bytes | None]]) -> list[tuple[str, bytes | None]]:
    last = max(i for i, (k, _) in enumerate(headers) if k == HEADER)
    return headers[:last] + headers[last + 1 :]
