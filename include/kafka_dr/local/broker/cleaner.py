"""Log compaction for `cleanup.policy=compact` topics, as Kafka's log cleaner does it.

Only closed segments are cleaned. The key map is built from them (the active segment is never
part of the cleanable range), every closed segment keeps the newest record per key, and
tombstones older than `delete.retention.ms` go. Rewritten batches keep their base offset,
producer id, epoch and base sequence, and retained records keep their offsets and timestamps.
Control batches (transaction markers) are kept as they are.
"""

from __future__ import annotations

import logging

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from .log import PartitionLog, Segment
from .records import ATTR_COMPRESSION_MASK, ATTR_LOG_APPEND_TIME, assign_offset, parse_header, set_log_append_time

log = logging.getLogger(__name__)


def _batches(segment: Segment):
    for j in range(len(segment.positions)):
        yield PartitionLog.batch_bytes(segment, j)


def dirty_ratio(partition: PartitionLog) -> float:
    """Share of the closed segments' bytes written since the last cleaning."""
    closed = partition.segments[:-1]
    total = sum(s.size for s in closed)
    dirty = sum(s.size for s in closed if s.base_offset >= partition.cleaned_offset)
    return dirty / total if total else 0.0


def clean(partition: PartitionLog, now_ms: int, delete_retention_ms: int) -> int:
    """Compact the closed segments of partition; returns how many records were removed."""
    closed = partition.segments[:-1]
    if not closed:
        return 0
    latest: dict[bytes, int] = {}
    for segment in closed:
        for batch in _batches(segment):
            if not parse_header(batch).is_control:
                for record in DefaultRecordBatch(batch):
                    if record.key is not None:
                        latest[bytes(record.key)] = record.offset
    removed = 0
    for segment in closed:
        out = bytearray()
        segment_removed = 0
        for batch in _batches(segment):
            header = parse_header(batch)
            if header.is_control:
                out += batch
                continue
            records = list(DefaultRecordBatch(batch))
            kept = [
                r
                for r in records
                if r.key is None
                or (
                    latest[bytes(r.key)] == r.offset
                    and not (r.value is None and r.timestamp < now_ms - delete_retention_ms)
                )
            ]
            segment_removed += len(records) - len(kept)
            if len(kept) == len(records):
                out += batch
            elif kept:
                out += _rebuild(header, kept)
        if segment_removed:
            partition.replace_segment(segment, bytes(out))
            removed += segment_removed
    partition.cleaned_offset = partition.segments[-1].base_offset
    return removed


def _rebuild(header, records) -> bytes:
    builder = DefaultRecordBatchBuilder(
        2,
        header.attributes & ATTR_COMPRESSION_MASK,
        header.is_transactional,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        batch_size=1 << 31,
    )
    for record in records:
        builder.append(record.offset - header.base_offset, record.timestamp, record.key, record.value, record.headers)
    batch = assign_offset(bytes(builder.build()), header.base_offset)
    if header.attributes & ATTR_LOG_APPEND_TIME:
        set_log_append_time(batch, header.max_timestamp)
    return bytes(batch)
