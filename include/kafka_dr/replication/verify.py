"""Compare a flow's destination with its source, partition by partition: what a DR drill trusts.

For each source partition, every committed source record that the cycle rule lets through must
appear in the destination exactly once (found by the last provenance hop), with the same key,
value, headers and timestamp. Reported per partition: expected, copied, missing, duplicated,
mismatched (with the fields that differ), filtered (blocked by the cycle rule) and skipped (ranges a
failback moved the flow past on purpose). With a replicator running, records it has not copied yet
are read again until `settle_s` has passed before they count as missing. `summarize` adds the
partitions up into the verify and backfill jobs' summary and its one-line error.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from ..clients import read_partition
from .provenance import HEADER, ForceCopy, blocked, hops

EXAMPLES = 5  # offsets listed per problem kind
PROBLEMS = ("missing", "duplicated", "mismatched")
COUNTS = ("expected", "copied", "filtered", "skipped", *PROBLEMS)
FIELDS = ("key", "value", "headers", "timestamp")  # compared between a record and its copy


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
    mismatched_fields: dict[str, int] = field(default_factory=dict)  # copies whose key, value, ... differ
    examples: dict[str, list[int]] = field(default_factory=dict)  # the first offsets of each problem

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
    for fields in mismatched.values():
        for name in fields:
            result.mismatched_fields[name] = result.mismatched_fields.get(name, 0) + 1
    for kind, offsets in (("missing", missing), ("duplicated", duplicated), ("mismatched", sorted(mismatched))):
        if offsets:
            result.examples[kind] = offsets[:EXAMPLES]
    return result


def summarize(results: list[VerifyResult]) -> dict[str, Any]:
    """The partitions' counts added up, status "verified" or "failed", and for a failure an `error` line naming
    each problem with its count and, per partition (the first few), its first offsets."""
    summary: dict[str, Any] = {k: sum(getattr(r, k) for r in results) for k in COUNTS}
    fields: dict[str, int] = {}
    for r in results:
        for name, n in r.mismatched_fields.items():
            fields[name] = fields.get(name, 0) + n
    summary["mismatched_fields"] = {name: fields[name] for name in FIELDS if name in fields}
    failed = [r for r in results if not r.ok]
    summary["status"] = "failed" if failed else "verified"
    if failed:
        kinds = [f"{summary[kind]} {kind}" for kind in PROBLEMS if summary[kind]]
        if fields:
            kinds[-1] += " (" + ", ".join(f"{name} {n}" for name, n in summary["mismatched_fields"].items()) + ")"
        where = "; ".join(
            f"{r.dest_topic}-{r.partition}: " + ", ".join(f"{kind} {offsets}" for kind, offsets in r.examples.items())
            for r in failed[:EXAMPLES]
        )
        summary["error"] = (
            f"{', '.join(kinds)} of {summary['expected']} records, in {len(failed)} of {len(results)} partitions; "
            f"{where}"
        )
    return summary


def _copies(task: VerifyTask, source: dict[int, tuple]) -> tuple[dict[int, int], dict[int, list[str]]]:
    """How often each source offset is in the destination, and the fields in which its copies differ from it."""
    seen: dict[int, int] = {}
    mismatched: dict[int, list[str]] = {}
    origin = (task.source_cluster_id, task.topic, task.partition)
    for m in _read(task.target_config, task.dest_topic, task.partition, "read_committed"):
        headers = m.headers() or []
        chain = hops(headers)
        if not chain or (chain[-1].cluster_id, chain[-1].topic, chain[-1].partition) != origin:
            continue
        offset = chain[-1].offset
        seen[offset] = seen.get(offset, 0) + 1
        original = source.get(offset)
        if original is not None:
            copy = (m.key(), m.value(), _without_last_hop(headers), m.timestamp()[1])
            differing = [name for name, a, b in zip(FIELDS, copy, original, strict=True) if a != b]
            if differing:
                known = mismatched.setdefault(offset, [])  # a duplicate may differ in other fields
                known += [name for name in differing if name not in known]
    return seen, mismatched


def _without_last_hop(headers: list[tuple[str, bytes | None]]) -> list[tuple[str, bytes | None]]:
    last = max(i for i, (k, _) in enumerate(headers) if k == HEADER)
    return headers[:last] + headers[last + 1 :]
