"""Translate committed source offsets into destination offsets, one source partition at a time
(the unit of work of a Spark task).

Exact translation (docs/design.md): a group committed at source offset O resumes in the destination at
the first record the flow copied from source offset O or later. The copies of one source partition
sit in their destination partition in source order (one ordered, idempotent writer per partition),
so a binary search over destination offsets finds where the smallest requested offset begins and
one forward read from there answers every group of the partition. A group ahead of everything
copied resumes right after the last copy.

Without provenance (a flow with `provenance: false`) the fallback is Replicator's: the timestamp of
the source record at O, looked up in the destination with offsetsForTimes semantics.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from ..clients import read_partition
from ..replication.provenance import copied_from
from ..times import epoch_ms

READ_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class PartitionRequest:
    """Every committed offset to translate for one source partition."""

    source_config: dict[str, Any]
    target_config: dict[str, Any]
    source_cluster_id: str
    topic: str
    partition: int
    dest_topic: str
    offsets: tuple[int, ...]
    source_end: int  # read_committed end of the source partition when planned
    provenance: bool = True
    # Destination offset from which records that are not copies of this partition were never seen by the source's
    # groups (a failback: what producers wrote into the restored cluster once they moved back, while the serving
    # cluster's last records were still being copied after them). A group resumes no later than the first of them.
    unseen_from: int | None = None


@dataclass(frozen=True)
class Translated:
    topic: str
    partition: int
    source_offset: int
    dest_topic: str
    dest_offset: int
    method: str  # "provenance", or "timestamp" for flows without provenance

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_READERS: dict[str, Consumer] = {}


def _reader(config: dict[str, Any]) -> Consumer:
    """One assign-only consumer per cluster and Python worker; short fetch waits because every read
    here stops at a known end and offset lookups queue behind a pending fetch on the connection."""
    key = json.dumps(config, sort_keys=True, default=str)
    if key not in _READERS:
        _READERS[key] = Consumer(
            {
                **config,
                "group.id": "_kdr.translate",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 10,
            }
        )
    return _READERS[key]


def translate_partition(request: PartitionRequest) -> list[Translated]:
    reader = _reader(request.target_config)
    dest = TopicPartition(request.dest_topic, request.partition)
    low, high = reader.get_watermark_offsets(dest, timeout=READ_TIMEOUT_S)
    wanted = sorted(set(request.offsets))
    if request.provenance:
        found = _by_provenance(reader, request, wanted, low, high)
        method = "provenance"
    else:
        found = _by_timestamp(reader, request, wanted, high)
        method = "timestamp"
    return [
        Translated(request.topic, request.partition, offset, request.dest_topic, found[offset], method)
        for offset in request.offsets
    ]


def _by_provenance(
    reader: Consumer, request: PartitionRequest, wanted: list[int], low: int, high: int
) -> dict[int, int]:
    origin = (request.source_cluster_id, request.topic, request.partition)
    start = _search(reader, request.dest_topic, request.partition, origin, wanted[0], low, high)
    found: dict[int, int] = {}
    after_last_copy = start
    pending = iter(wanted)
    current = next(pending, None)
    for message in read_partition(reader, request.dest_topic, request.partition, start, high, READ_TIMEOUT_S):
        source_offset = copied_from(message.headers(), origin)
        if source_offset is None:
            continue
        while current is not None and current <= source_offset:
            found[current] = message.offset()
            current = next(pending, None)
        after_last_copy = message.offset() + 1
        if current is None:
            break
    ahead = {offset for offset in wanted if offset not in found}
    # A failback's serving cluster (unseen_from set) holds copies of the restored cluster's own records, and a group
    # may have stopped among them: the record each group reads next is looked at then; elsewhere only the last one
    # read by those ahead of every copy (a read of the source that the checkpoint passes would pay every time).
    failback = request.unseen_from is not None
    originals = _round_trip_originals(reader, request, {o - 1 for o in ahead} | (set(found) if failback else set()))
    for offset in wanted:
        if offset in ahead:  # ahead of everything copied: after the last copy, or after the original it read last
            found[offset] = max(after_last_copy, originals.get(offset - 1, -1) + 1)
        elif offset in originals:  # it reads a copy of the destination's record next: that record's original
            found[offset] = min(found[offset], originals[offset])
    if request.unseen_from is not None:  # (not `failback`: this narrows its type)
        first_unseen = _first_non_copy(reader, request, origin, max(request.unseen_from, low), max(found.values()))
        if first_unseen is not None:  # read it rather than skip it: the copies after it are read twice
            found = {offset: min(dest, first_unseen) for offset, dest in found.items()}
    return found


def _round_trip_originals(reader: Consumer, request: PartitionRequest, offsets: set[int]) -> dict[int, int]:
    """{source offset: destination offset} for the records at `offsets` that are copies from the destination (their
    last hop names the destination cluster, topic and partition): the round trips of a failback's serving cluster,
    which holds copies of the restored cluster's records. One read of the source over those offsets; the
    destination's connection (`reader`) names its cluster."""
    if not offsets:  # the usual case: every group has a copy at or after its offset, and the source is not asked
        return {}
    source = _reader(request.source_config)
    low, high = source.get_watermark_offsets(TopicPartition(request.topic, request.partition), timeout=READ_TIMEOUT_S)
    wanted = {offset for offset in offsets if low <= offset < high}
    if not wanted:
        return {}
    result: dict[int, int] = {}
    cluster_id = None
    for message in read_partition(
        source, request.topic, request.partition, min(wanted), max(wanted) + 1, READ_TIMEOUT_S
    ):
        if message.offset() not in wanted or not message.headers():
            continue
        if cluster_id is None:
            cluster_id = reader.list_topics(request.dest_topic, timeout=READ_TIMEOUT_S).cluster_id
        original = copied_from(message.headers(), (cluster_id, request.dest_topic, request.partition))
        if original is not None:
            result[message.offset()] = original
    return result


def _first_non_copy(
    reader: Consumer, request: PartitionRequest, origin: tuple[str, str, int], start: int, stop: int
) -> int | None:
    """The first destination offset in [start, stop) whose record is not a copy of `origin`."""
    for message in read_partition(reader, request.dest_topic, request.partition, start, stop, READ_TIMEOUT_S):
        if copied_from(message.headers(), origin) is None:
            return message.offset()
    return None


def _search(
    reader: Consumer, topic: str, partition: int, origin: tuple[str, str, int], target: int, low: int, high: int
) -> int:
    """Smallest destination offset from which the first copy of `origin` has a source offset >= `target`
    (or after the last copy below `target` when there is none): every copy before it is below `target`."""
    while low < high:
        middle = (low + high) // 2
        hit = _next_copy(reader, topic, partition, origin, middle, high)
        if hit is None or hit[1] >= target:
            high = middle
        else:
            low = hit[0] + 1
    return low


def _next_copy(
    reader: Consumer, topic: str, partition: int, origin: tuple[str, str, int], start: int, stop: int
) -> tuple[int, int] | None:
    """(destination offset, source offset) of the first copy of `origin` in [start, stop)."""
    for message in read_partition(reader, topic, partition, start, stop, READ_TIMEOUT_S):
        source_offset = copied_from(message.headers(), origin)
        if source_offset is not None:
            return message.offset(), source_offset
    return None


def _by_timestamp(reader: Consumer, request: PartitionRequest, wanted: list[int], high: int) -> dict[int, int]:
    """offsetsForTimes of the source record at each offset; a group at the source end resumes at the end."""
    source = _reader(request.source_config)
    found: dict[int, int] = {}
    for offset in wanted:
        timestamp = None
        if offset < request.source_end:
            record = next(
                read_partition(source, request.topic, request.partition, offset, request.source_end, READ_TIMEOUT_S),
                None,
            )
            timestamp = None if record is None else record.timestamp()[1]
        if timestamp is None:
            found[offset] = high
            continue
        found[offset] = offsets_for_times(
            request.target_config, request.dest_topic, {request.partition: timestamp}, reader
        )[request.partition]
    return found


def offsets_for_times(
    config: dict[str, Any], topic: str, times: dict[int, int], reader: Consumer | None = None
) -> dict[int, int]:
    """Per partition, the earliest offset whose timestamp is >= the given time (Kafka's offsetsForTimes),
    or the log end offset when there is none: what `kafka-consumer-groups --reset-offsets --to-datetime`
    commits."""
    reader = reader or _reader(config)
    result = reader.offsets_for_times([TopicPartition(topic, p, ts) for p, ts in times.items()], timeout=READ_TIMEOUT_S)
    offsets = {}
    for tp in result:
        offsets[tp.partition] = (
            tp.offset
            if tp.offset >= 0
            else reader.get_watermark_offsets(TopicPartition(topic, tp.partition), timeout=READ_TIMEOUT_S)[1]
        )
    return offsets


def offsets_at_time(
    target_config: dict[str, Any], admin: AdminClient, groups: dict[str, list[Translated]], reset_ms: int
) -> dict[str, list[Translated]]:
    """Each group's target offsets at `reset_ms` in every partition of its destination topics (a reset to datetime
    instead of the translated offsets)."""
    topics = sorted({t.dest_topic for ts in groups.values() for t in ts})
    metadata = admin.list_topics(timeout=READ_TIMEOUT_S).topics
    at_time = {
        topic: offsets_for_times(target_config, topic, {p: reset_ms for p in metadata[topic].partitions})
        for topic in topics
        if topic in metadata
    }
    reset: dict[str, list[Translated]] = {}
    for group, translations in groups.items():
        sources = {t.dest_topic: t.topic for t in translations}
        reset[group] = [
            Translated(sources[dest], partition, -1, dest, offset, "datetime")
            for dest in sorted(sources)
            if dest in at_time
            for partition, offset in sorted(at_time[dest].items())
        ]
    return reset


def close_readers() -> None:
    """Close the cached readers (in-process callers; Spark workers simply exit)."""
    while _READERS:
        _READERS.popitem()[1].close()


def parse_reset_time(text: str) -> int:
    """Epoch milliseconds of an ISO-8601 time for a reset to datetime; without a time zone it is UTC.
    A bad value raises ValueError with one line naming it."""
    return epoch_ms(text, "reset_to_datetime")
