"""Log compaction for `cleanup.policy=compact` topics, as Kafka's log cleaner does it.

The cleanable range is the closed segments below the last stable offset: an open transaction's
records are never cleaned before its outcome is known. The key map is built from the dirty part of
the range only (the segments written since the last cleaning, from `cleaned_offset`), as Kafka's
offset map is: a dirty record survives if it is the newest for its key, a record of the clean part
(already one per key) unless its key comes again in the dirty part. Tombstones older than
`delete.retention.ms` go. Records of aborted transactions go (once their abort marker is in the
range) and never count as the newest for their key, so they cannot hide a committed value.

A transaction marker (control batch) goes once no record of its transaction stays before it (from
its producer's previous marker on) and it is older than `delete.retention.ms`, so a reader that saw
the records still finds the marker for that long (KIP-98). An aborted transaction whose records are
gone leaves the partition's aborted list: read_committed fetches stop listing it.

The range is read once to decide (one decode of each dirty record); the write pass reads only the
batches that stay. It is rewritten in groups of consecutive segments of at most `segment.bytes`
cleaned (Kafka's groupSegmentsBySize), each group becoming one segment at its first base offset, so
a log rolled every `segment.ms` keeps a few segments; a segment may end up empty: offsets and the
log start offset never move. Kept batches are copied byte for byte; a batch losing some of its
records is rebuilt with its base offset, producer id, epoch and base sequence, each record keeping
its offset and timestamp. A segment left as it was, alone in its group, is not rewritten.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Iterator

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from .log import AbortedTxn, PartitionLog, Segment
from .records import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_LOG_APPEND_TIME,
    ATTR_TRANSACTIONAL,
    BatchHeader,
    assign_offset,
    parse_header,
    record_keys,
    set_log_append_time,
)

log = logging.getLogger(__name__)


def cleanable_segments(partition: PartitionLog) -> list[Segment]:
    """Closed segments that end at or below the last stable offset (Kafka's firstUncleanableOffset)."""
    segments = partition.segments
    stable = partition.last_stable_offset
    return [s for s, nxt in zip(segments, segments[1:], strict=False) if nxt.base_offset <= stable]


def dirty_ratio(partition: PartitionLog) -> float:
    """Share of the cleanable segments' bytes written since the last cleaning."""
    cleanable = cleanable_segments(partition)
    total = sum(s.size for s in cleanable)
    dirty = sum(s.size for s in cleanable if s.base_offset >= partition.cleaned_offset)
    return dirty / total if total else 0.0


def _batches(data: bytes) -> Iterator[tuple[int, BatchHeader, memoryview]]:
    view = memoryview(data)
    pos = 0
    while pos < len(data):
        header = parse_header(data, pos)
        end = pos + header.length
        yield pos, header, view[pos:end]
        pos = end


def _read(segment: Segment) -> bytes:
    return os.pread(segment.fd, segment.size, 0)


class _Aborted:
    """The partition's aborted transactions by producer, to tell which data batches are aborted."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._by_producer: dict[int, list[AbortedTxn]] = {}
        for txn in sorted(aborted, key=lambda t: t.last_offset):
            self._by_producer.setdefault(txn.producer_id, []).append(txn)

    def find(self, header: BatchHeader) -> AbortedTxn | None:
        """The aborted transaction a data batch belongs to, if any."""
        txns = self._by_producer.get(header.producer_id) if header.attributes & ATTR_TRANSACTIONAL else None
        if not txns:
            return None
        i = bisect.bisect_left(txns, header.base_offset, key=lambda t: t.last_offset)
        return txns[i] if i < len(txns) and txns[i].first_offset <= header.base_offset else None


# What may stay of a batch, by its position in its segment: True the whole batch (a marker, decided once the records
# before it are, or an aborted batch kept as is), a set the offsets of its records that stay, None a batch of the
# clean part, checked once the key map is whole.
_Keep = bool | set[int] | None


def clean(partition: PartitionLog, now_ms: int, delete_retention_ms: int) -> int:
    """Compact the cleanable segments of partition; returns how many records (markers included) were removed."""
    segments = cleanable_segments(partition)
    if not segments:
        return 0
    cleaning = _Cleaning(partition, segments, now_ms - delete_retention_ms)
    cleaning.decide()
    removed = cleaning.write()
    partition.aborted = [t for t in partition.aborted if t.last_offset >= cleaning.end]  # the others' records are gone
    partition.cleaned_offset = cleaning.end
    return removed


def _expired(deleted_at: int | None, horizon: int) -> bool:
    """A tombstone older than delete.retention.ms (deleted_at is None for a record with a value)."""
    return deleted_at is not None and deleted_at < horizon


class _Cleaning:
    """One pass of the cleaner over a partition's cleanable segments: decide what stays (one read), then write it."""

    def __init__(self, partition: PartitionLog, segments: list[Segment], horizon: int) -> None:
        self.partition = partition
        self.segments = segments
        self.end = partition.segments[len(segments)].base_offset
        self.horizon = horizon
        self.keep: list[dict[int, _Keep]] = [{} for _ in segments]  # by segment, by batch position
        self.records = [0] * len(segments)  # by segment, before cleaning
        self.latest: dict[bytes, tuple[int, int, int, bool]] = {}  # key: segment index, position, offset, expired

    def decide(self) -> None:
        """Read the range once: aborted batches are decided on the spot, the dirty part fills the key map with where
        each key's newest record is."""
        aborted = _Aborted(self.partition.aborted)
        for i, segment in enumerate(self.segments):
            dirty = segment.base_offset >= self.partition.cleaned_offset
            for position, header, batch in _batches(_read(segment)):
                self.records[i] += header.records_count
                self._decide_batch(i, position, header, batch, aborted, dirty)
        for i, position, offset, expired in self.latest.values():
            if not expired:
                self.keep[i].setdefault(position, set()).add(offset)  # a dirty data batch: never True or None

    def _decide_batch(
        self, i: int, position: int, header: BatchHeader, batch: memoryview, aborted: _Aborted, dirty: bool
    ) -> None:
        keep = self.keep[i]
        if header.attributes & ATTR_CONTROL:
            keep[position] = True
            return
        txn = aborted.find(header)
        if txn is not None:
            if txn.last_offset >= self.end:
                keep[position] = True  # its abort marker is beyond the range: a later pass drops it
        elif not dirty:
            keep[position] = None
        else:
            for offset, key, deleted_at in record_keys(batch, header):
                if key is None:  # not compacted (a topic switched from delete)
                    keep.setdefault(position, set()).add(offset)
                else:
                    self.latest[key] = (i, position, offset, _expired(deleted_at, self.horizon))

    def write(self) -> int:
        """Write what stays, in groups of consecutive segments of at most segment.bytes; returns the records removed."""
        removed = 0
        open_txns: set[int] = set()  # producers with a record of their current transaction kept
        group: list[Segment] = []
        group_data = bytearray()
        group_changed = False
        for i, segment in enumerate(self.segments):
            out, segment_kept = self._kept_batches(i, segment, open_txns)
            if group and len(group_data) + len(out) > self.partition.segment_bytes:
                _replace(self.partition, group, group_data, group_changed)
                group, group_data, group_changed = [], bytearray(), False
            group.append(segment)
            group_data += out
            group_changed = group_changed or segment_kept < self.records[i]
            removed += self.records[i] - segment_kept
        _replace(self.partition, group, group_data, group_changed)
        return removed

    def _kept_batches(self, i: int, segment: Segment, open_txns: set[int]) -> tuple[bytearray, int]:
        """What stays of segment i (whole batches copied, the others rebuilt) and how many records that is."""
        out = bytearray()
        segment_kept = 0
        data = _read(segment) if self.keep[i] else b""
        for position in sorted(self.keep[i]):
            header = parse_header(data, position)
            batch = memoryview(data)[position : position + header.length]
            kept = self._kept(self.keep[i][position], header, batch, open_txns)
            if kept is True or (kept and len(kept) == header.records_count):
                out += batch
                segment_kept += header.records_count
            elif kept:
                out += _rebuild(header, batch, kept)
                segment_kept += len(kept)
        return out, segment_kept

    def _kept(self, kept: _Keep, header: BatchHeader, batch: memoryview, open_txns: set[int]) -> bool | set[int]:
        """The read pass's decision made final. A marker stays while a record of its transaction stays before it (from
        the producer's previous marker on), or while younger than the horizon."""
        if header.attributes & ATTR_CONTROL:
            kept = header.producer_id in open_txns or header.max_timestamp >= self.horizon
            open_txns.discard(header.producer_id)
        elif kept is None:
            kept = {
                offset
                for offset, key, deleted_at in record_keys(batch, header)
                if key is None or (key not in self.latest and not _expired(deleted_at, self.horizon))
            }
        if kept and header.attributes & ATTR_TRANSACTIONAL and not header.attributes & ATTR_CONTROL:
            open_txns.add(header.producer_id)
        return kept


def _replace(partition: PartitionLog, group: list[Segment], data: bytearray, changed: bool) -> None:
    if changed or len(group) > 1:
        partition.replace_segments(group, bytes(data))


def _rebuild(header: BatchHeader, batch: memoryview, kept: set[int]) -> bytes:
    builder = DefaultRecordBatchBuilder(
        2,
        header.attributes & ATTR_COMPRESSION_MASK,
        header.is_transactional,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        batch_size=1 << 31,
    )
    for record in DefaultRecordBatch(bytes(batch)):
        if record.offset in kept:
            builder.append(
                record.offset - header.base_offset, record.timestamp, record.key, record.value, record.headers
            )
    rebuilt = assign_offset(bytes(builder.build()), header.base_offset)
    if header.attributes & ATTR_LOG_APPEND_TIME:
        set_log_append_time(rebuilt, header.max_timestamp)
    return bytes(rebuilt)
