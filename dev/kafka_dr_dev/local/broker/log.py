"""One partition's log: Kafka segment files on disk, a batch index in memory, producer state.

Layout is Apache Kafka's: a directory `<topic>-<partition>` holding `<20-digit base offset>.log`
segments of record batches back to back. The in-memory index (one entry per batch) and the
producer/transaction state are rebuilt from the segments at start, so nothing else needs to be
durable except the log start offset checkpoint.

The active segment rolls as in Kafka's LogSegment.shouldRoll, before any append (records or a
transaction marker): when the batch would take it past `segment.bytes`, or when the batch's max
timestamp is more than `segment.ms` after the segment's first batch (wall clock since the segment
was opened when that batch has no timestamp), so records dated over a month land in a month of
segments. The cleaner (cleaner.py) swaps groups of closed segments for one cleaned segment, through
a `.swap` file a restart completes; a cleaned segment may be empty and keeps its base offset.
Retention deletes segments only of topics whose `cleanup.policy` includes `delete`.
"""

from __future__ import annotations

import bisect
import collections
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import crc32c
import kafka.errors as Errors

from kafka_dr.processes import write_atomic

from .records import (
    CONTROL_ABORT,
    CRC_START,
    HEADER_SIZE,
    BatchHeader,
    control_batch,
    control_type,
    first_offset_at_or_after,
    offset_of_max_timestamp,
    parse_header,
)

log = logging.getLogger(__name__)

START_OFFSET_FILE = "log-start-offset-checkpoint"
CLEANED_SUFFIX = ".cleaned"  # a cleaned segment being written: dropped at start, the old segments stand
SWAP_SUFFIX = ".swap"  # `<first base>.<end>.swap`, written whole: it replaces the segments with bases in [first, end)
PRODUCER_WINDOW = 5  # Kafka keeps the last five batches per producer to answer retries


@dataclass
class Segment:
    base_offset: int
    path: Path
    fd: int
    size: int = 0
    # One entry per batch, parallel lists: bisect over last offsets to find a fetch position.
    lasts: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    max_timestamps: list[int] = field(default_factory=list)
    opened_ms: float = field(default_factory=lambda: time.time() * 1000)  # for segment.ms without timestamps

    @property
    def max_timestamp(self) -> int:
        return max(self.max_timestamps, default=-1)

    @property
    def rolling_timestamp(self) -> int:
        """Kafka's rollingBasedTimestamp: the first batch's max timestamp (-1 when empty or not set)."""
        return self.max_timestamps[0] if self.max_timestamps else -1

    def close(self) -> None:
        os.close(self.fd)


@dataclass
class ProducerState:
    epoch: int
    last_sequence: int
    # (first sequence, last sequence, base offset) of recent batches, for idempotent retries.
    recent: collections.deque = field(default_factory=lambda: collections.deque(maxlen=PRODUCER_WINDOW))


@dataclass(frozen=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # offset of the abort marker


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


class PartitionLog:
    """A single-replica partition: the high watermark is the log end offset."""

    def __init__(self, directory: Path, config: Callable[[str], object]) -> None:
        self.directory = directory
        self._config = config
        self.segments: list[Segment] = []
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.producers: dict[int, ProducerState] = {}
        self.ongoing_txns: dict[int, int] = {}  # producer id -> first offset in this partition
        self.aborted: list[AbortedTxn] = []
        self.cleaned_offset = 0  # compaction: closed segments below this were cleaned
        directory.mkdir(parents=True, exist_ok=True)
        self._load()

    # ---- loading ---------------------------------------------------------------------------
    def _load(self) -> None:
        checkpoint = self.directory / START_OFFSET_FILE
        if checkpoint.exists():
            self.log_start_offset = int(checkpoint.read_text().strip() or 0)
        self._complete_swaps()
        paths = sorted(self.directory.glob("*.log"))
        for i, path in enumerate(paths):
            segment = self._open_segment(int(path.stem), path)
            if not self._recover_segment(segment):
                # A torn or corrupt batch: everything after it is unreliable, as in Kafka recovery.
                for later in paths[i + 1 :]:
                    log.warning("deleting segment %s after corruption in %s", later, path)
                    later.unlink()
                break
        if not self.segments:
            self._roll(max(self.log_start_offset, 0))
        self.log_end_offset = max(self.log_end_offset, self.segments[-1].base_offset)
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)

    def _complete_swaps(self) -> None:
        """Finish a cleaning that stopped while swapping segments (replace_segments), as Kafka's recovery does."""
        for path in self.directory.glob(f"*{CLEANED_SUFFIX}"):
            path.unlink()
        for swap in sorted(self.directory.glob(f"*{SWAP_SUFFIX}")):
            first, end = (int(part) for part in swap.name.split(".")[:2])
            for path in self.directory.glob("*.log"):
                if first <= int(path.stem) < end:
                    path.unlink()
            swap.replace(self.directory / segment_name(first))

    def _open_segment(self, base_offset: int, path: Path) -> Segment:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        segment = Segment(base_offset, path, fd)
        self.segments.append(segment)
        return segment

    def _recover_segment(self, segment: Segment) -> bool:
        """Index every valid batch; truncate at the first torn or corrupt one. False if truncated."""
        data = Path(segment.path).read_bytes()
        pos = 0
        while pos + HEADER_SIZE <= len(data):
            header = parse_header(data, pos)
            end = pos + header.length
            if (
                end > len(data)
                or header.length < HEADER_SIZE
                or crc32c.crc32c(memoryview(data)[pos + CRC_START : end]) != header.crc
            ):
                break
            self._index(segment, header, pos)
            self._track_producer(header, header.base_offset, memoryview(data)[pos:end])
            pos = end
        segment.size = pos
        if pos != len(data):
            log.warning("truncating %s at byte %d of %d (torn write)", segment.path, pos, len(data))
            os.truncate(segment.path, pos)
            return False
        return True

    def _index(self, segment: Segment, header: BatchHeader, position: int) -> None:
        segment.lasts.append(header.last_offset)
        segment.positions.append(position)
        segment.max_timestamps.append(header.max_timestamp)
        self.log_end_offset = header.last_offset + 1

    # ---- state -----------------------------------------------------------------------------
    @property
    def high_watermark(self) -> int:
        return self.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        return min(self.ongoing_txns.values(), default=self.log_end_offset)

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def segment_bytes(self) -> int:
        """segment.bytes: where the active segment rolls, and how big the cleaner's merged segments may grow."""
        return int(self._config("segment.bytes"))

    def _track_producer(self, header: BatchHeader, base_offset: int, batch: bytes | memoryview) -> None:
        """Update idempotence and transaction state for an appended (or recovered) batch."""
        pid = header.producer_id
        if pid < 0:
            return
        if header.is_control:
            first = self.ongoing_txns.pop(pid, None)
            state = self.producers.get(pid)
            if state is None or header.producer_epoch > state.epoch:
                self.producers[pid] = ProducerState(header.producer_epoch, -1)
            if first is not None and control_type(batch) == CONTROL_ABORT:
                self.aborted.append(AbortedTxn(pid, first, base_offset))
            return
        if header.is_transactional:
            self.ongoing_txns.setdefault(pid, base_offset)
        state = self.producers.get(pid)
        if state is None or state.epoch != header.producer_epoch:
            state = self.producers[pid] = ProducerState(header.producer_epoch, -1)
        if header.base_sequence >= 0:
            state.last_sequence = header.last_sequence
            state.recent.append((header.base_sequence, header.last_sequence, base_offset))

    def check_producer(self, header: BatchHeader) -> int | None:
        """Validate a producer's sequence; return the original offset if the batch is a retry."""
        state = self.producers.get(header.producer_id)
        if header.producer_id < 0 or state is None:
            return None
        if header.producer_epoch < state.epoch:
            error = Errors.ProducerFencedError if header.is_transactional else Errors.InvalidProducerEpochError
            raise error(f"producer epoch {header.producer_epoch} is older than {state.epoch}")
        if header.producer_epoch > state.epoch or header.base_sequence < 0:
            if header.producer_epoch > state.epoch and header.base_sequence not in (0, -1):
                raise Errors.OutOfOrderSequenceNumberError(
                    f"new epoch {header.producer_epoch} must start at sequence 0, got {header.base_sequence}"
                )
            return None
        for first, last, offset in state.recent:
            if first == header.base_sequence and last == header.last_sequence:
                return offset
        expected = (state.last_sequence + 1) % 2**31
        if header.base_sequence != expected:
            raise Errors.OutOfOrderSequenceNumberError(f"expected sequence {expected}, got {header.base_sequence}")
        return None

    # ---- writes ----------------------------------------------------------------------------
    def _roll(self, base_offset: int) -> Segment:
        return self._open_segment(base_offset, self.directory / segment_name(base_offset))

    def _should_roll(self, active: Segment, header: BatchHeader) -> bool:
        """Kafka's LogSegment.shouldRoll (without segment.jitter.ms) for a non-empty active segment."""
        if active.size + header.length > self.segment_bytes:
            return True
        first = active.rolling_timestamp
        waited = header.max_timestamp - first if first >= 0 else time.time() * 1000 - active.opened_ms
        return waited > int(self._config("segment.ms"))

    def append(self, batch: bytearray, header: BatchHeader) -> int:
        """Append a batch whose base offset is already stamped with log_end_offset."""
        active = self.segments[-1]
        if active.size and self._should_roll(active, header):
            active = self._roll(header.base_offset)
        written = os.write(active.fd, batch)
        if written != len(batch):
            raise Errors.KafkaStorageError(f"short write to {active.path}")
        self._index(active, header, active.size)
        active.size += len(batch)
        self._track_producer(header, header.base_offset, batch)
        return header.base_offset

    def append_marker(
        self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, now_ms: int
    ) -> int:
        """A transaction marker, appended (and rolling) like any batch, as Kafka's appendAsLeader does."""
        batch = bytearray(
            control_batch(self.log_end_offset, producer_id, producer_epoch, commit, coordinator_epoch, now_ms)
        )
        return self.append(batch, parse_header(batch))

    # ---- reads -----------------------------------------------------------------------------
    def _locate(self, offset: int) -> tuple[Segment, int] | None:
        """The segment and batch index of the batch holding offset (or the next one after it)."""
        i = bisect.bisect_right([s.base_offset for s in self.segments], offset) - 1
        for segment in self.segments[max(i, 0) :]:
            j = bisect.bisect_left(segment.lasts, offset)
            if j < len(segment.lasts):
                return segment, j
        return None

    @staticmethod
    def batch_bytes(segment: Segment, j: int) -> bytes:
        """The j-th batch of a segment, read from disk."""
        end = segment.positions[j + 1] if j + 1 < len(segment.positions) else segment.size
        return os.pread(segment.fd, end - segment.positions[j], segment.positions[j])

    def read(self, offset: int, max_bytes: int, upper_bound: int) -> bytes:
        """Whole batches from the one holding offset, below upper_bound, about max_bytes in total.

        The first batch is returned whole even when larger than max_bytes (KIP-74), so a consumer
        always makes progress.
        """
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise Errors.OffsetOutOfRangeError(
                f"offset {offset} outside [{self.log_start_offset}, {self.log_end_offset}]"
            )
        if offset >= upper_bound:
            return b""
        found = self._locate(offset)
        if found is None:
            return b""
        segment, j = found
        start = segment.positions[j]
        end = start
        k = j
        while k < len(segment.lasts) and segment.lasts[k] < upper_bound:
            batch_end = segment.positions[k + 1] if k + 1 < len(segment.positions) else segment.size
            if k > j and batch_end - start > max_bytes:
                break
            end = batch_end
            k += 1
        return os.pread(segment.fd, end - start, start) if end > start else b""

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start, end): what read_committed fetches must list."""
        return [t for t in self.aborted if t.first_offset < end and t.last_offset >= start]

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """Earliest (offset, timestamp) whose timestamp is >= timestamp_ms, from log start on."""
        for segment in self.segments:
            if segment.max_timestamp < timestamp_ms:
                continue
            for j, max_ts in enumerate(segment.max_timestamps):
                if max_ts < timestamp_ms or segment.lasts[j] < self.log_start_offset:
                    continue
                batch = self.batch_bytes(segment, j)
                if parse_header(batch).is_control:
                    continue
                found = first_offset_at_or_after(batch, timestamp_ms, self.log_start_offset)
                if found is not None:
                    return found
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp (ListOffsets -3)."""
        best: tuple[int, Segment, int] | None = None
        for segment in self.segments:
            for j, max_ts in enumerate(segment.max_timestamps):
                if segment.lasts[j] >= self.log_start_offset and (best is None or max_ts > best[0]):
                    best = (max_ts, segment, j)
        if best is None:
            return None
        max_ts, segment, j = best
        return offset_of_max_timestamp(self.batch_bytes(segment, j)), max_ts

    def replace_segments(self, group: list[Segment], data: bytes) -> None:
        """Swap consecutive closed segments for one cleaned segment holding data, at the first one's base offset.

        The data is written aside, then renamed to a `.swap` file naming the offsets it replaces, so that a crash
        at any point leaves either the old segments or the swap, never a batch twice (_complete_swaps)."""
        first = group[0]
        i = self.segments.index(first)
        end = self.segments[i + len(group)].base_offset
        cleaned = first.path.with_suffix(CLEANED_SUFFIX)
        cleaned.write_bytes(data)
        swap = self.directory / f"{first.base_offset:020d}.{end:020d}{SWAP_SUFFIX}"
        cleaned.replace(swap)
        for segment in group:
            segment.close()
        for segment in group[1:]:
            segment.path.unlink()
        del self.segments[i + 1 : i + len(group)]
        swap.replace(first.path)
        first.fd = os.open(first.path, os.O_RDWR | os.O_APPEND)
        first.lasts, first.positions, first.max_timestamps = [], [], []
        pos = 0
        while pos < len(data):
            header = parse_header(data, pos)
            first.lasts.append(header.last_offset)
            first.positions.append(pos)
            first.max_timestamps.append(header.max_timestamp)
            pos += header.length
        first.size = len(data)

    # ---- deletion --------------------------------------------------------------------------
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset forward (never past the high watermark)."""
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            raise Errors.OffsetOutOfRangeError(
                f"cannot delete before {offset}: high watermark is {self.high_watermark}"
            )
        if offset > self.log_start_offset:
            self._set_log_start(offset)
            self._drop_segments(lambda s, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset)
        return self.log_start_offset

    def _set_log_start(self, offset: int) -> None:
        self.log_start_offset = offset
        write_atomic(self.directory / START_OFFSET_FILE, f"{offset}\n")
        self.aborted = [t for t in self.aborted if t.last_offset >= offset]

    def enforce_retention(self, now_ms: int) -> int:
        """Delete closed segments past retention.ms / retention.bytes; return records removed.

        Only for `cleanup.policy` with `delete`: a compacted log keeps every key's newest record however old."""
        if "delete" not in [p.strip() for p in str(self._config("cleanup.policy")).split(",")]:
            return 0
        retention_ms = int(self._config("retention.ms"))
        retention_bytes = int(self._config("retention.bytes"))
        before = self.log_start_offset
        active = self.segments[-1]
        if retention_ms >= 0 and active.size and now_ms - active.max_timestamp > retention_ms:
            self._roll(self.log_end_offset)  # every record expired: roll so the old segment can go
        total = self.size_bytes

        def expired(segment: Segment, nxt: Segment | None) -> bool:
            nonlocal total
            if nxt is None:
                return False  # never the active segment
            # A segment the cleaner emptied (cleanup.policy=compact,delete) holds nothing left to keep.
            too_old = retention_ms >= 0 and (
                not segment.lasts or (segment.max_timestamp >= 0 and now_ms - segment.max_timestamp > retention_ms)
            )
            too_big = retention_bytes >= 0 and total - segment.size >= retention_bytes
            if too_old or too_big:
                total -= segment.size
                return True
            return False

        if self._drop_segments(expired):
            self._set_log_start(max(self.log_start_offset, self.segments[0].base_offset))
        return self.log_start_offset - before

    def _drop_segments(self, should_drop: Callable[[Segment, Segment | None], bool]) -> bool:
        dropped = False
        while len(self.segments) > 1 and should_drop(self.segments[0], self.segments[1]):
            segment = self.segments.pop(0)
            segment.close()
            segment.path.unlink(missing_ok=True)
            dropped = True
        return dropped

    def close(self) -> None:
        for segment in self.segments:
            segment.close()
        self.segments = []
