"""Where a flow resumes: the destination log is the truth.

The last record of this flow in a destination partition (the last one whose final provenance hop
names the flow's source cluster, topic and partition) says which source offset was copied last.
A `_kdr.progress` record only bounds the search: copies written after it are found by reading
the destination from the record's destination offset to the end.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from ..clients import read_partition
from .internal import PROGRESS
from .provenance import copied_from

SCAN_WINDOW = 10_000  # records read per step when searching backwards without a progress record


@dataclass(frozen=True)
class Progress:
    """A flow's `_kdr.progress` record of one source partition: how far its copy is durable."""

    next: int  # next source offset to copy
    dest_topic: str
    dest_next: int  # destination log end offset when the record was written
    source_cluster: str | None = None  # id of the source cluster whose offsets these are (None: written before ids)

    def to_dict(self) -> dict[str, Any]:
        """The `_kdr.progress` value (JSON)."""
        data: dict[str, Any] = {"next": self.next, "dest_topic": self.dest_topic, "dest_next": self.dest_next}
        if self.source_cluster is not None:
            data["source_cluster"] = self.source_cluster
        return data

    def to_json(self) -> bytes:
        return json.dumps(self.to_dict()).encode()


def read_progress(consumer: Consumer, timeout: float = 10.0) -> dict[str, Progress]:
    """Every `_kdr.progress` entry (last value per key wins), keyed `flow/topic/partition`."""
    entries: dict[str, Progress] = {}
    for key, value in _read_all(consumer, PROGRESS, 0, timeout):
        if key is None:
            continue
        if value is None:
            entries.pop(key.decode(), None)
            continue
        data = json.loads(value)
        if "next" in data:
            entries[key.decode()] = Progress(
                data["next"], data["dest_topic"], data["dest_next"], data.get("source_cluster")
            )
    return entries


def _read_all(consumer: Consumer, topic: str, partition: int, timeout: float):
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
    if high > low:
        for message in read_partition(consumer, topic, partition, OFFSET_BEGINNING, high, timeout):
            yield message.key(), message.value()


def last_copy(
    consumer: Consumer,
    dest_topic: str,
    partition: int,
    start: int,
    end: int,
    origin: tuple[str, str, int],
    timeout: float,
) -> int | None:
    """Origin offset of the last record copied from the source partition `origin` (cluster id, topic,
    partition) within [start, end) of the destination partition."""
    found = None
    for message in read_partition(consumer, dest_topic, partition, start, end, timeout):
        offset = copied_from(message.headers(), origin)
        if offset is not None:
            found = offset
    return found


def resume_offset(
    consumer: Consumer,
    dest_topic: str,
    partition: int,
    source_cluster_id: str,
    source_topic: str,
    progress: Progress | None,
    high_watermark: int | None = None,
    timeout: float = 10.0,
) -> int | None:
    """Next source offset to copy, or None when the destination holds nothing of this partition.

    `consumer` reads the destination with read_committed, so that copies a crashed or fenced writer
    left in an aborted transaction do not count; its end offset is then the last stable offset.
    A progress record is committed with the copies it covers, so it holds even when another producer's
    open transaction hides them; copies committed after such a transaction are found by the copy
    task's take-over (copier.py), which reads on from the stable offset. A record past the
    destination's `high_watermark` belongs to a topic since deleted and re-created, and one naming another source
    cluster id to a source cluster since rebuilt (a failback's `data_lost`): both are ignored.
    """
    low, stable = consumer.get_watermark_offsets(TopicPartition(dest_topic, partition), timeout=timeout)
    origin = (source_cluster_id, source_topic, partition)
    ceiling = stable if high_watermark is None else high_watermark
    if progress is not None and progress.source_cluster not in (None, source_cluster_id):
        progress = None  # offsets of a source cluster since lost and rebuilt (a new id): they mean nothing here
    if progress is not None and progress.dest_topic == dest_topic and low <= progress.dest_next <= ceiling:
        last = last_copy(consumer, dest_topic, partition, progress.dest_next, stable, origin, timeout)
        return progress.next if last is None else max(last + 1, progress.next)
    end = stable
    window = SCAN_WINDOW
    while end > low:
        start = max(low, end - window)
        last = last_copy(consumer, dest_topic, partition, start, end, origin, timeout)
        if last is not None:
            return last + 1
        end, window = start, window * 2
    return None
