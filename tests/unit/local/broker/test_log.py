"""The embedded broker's partition log: append, read, recovery after crashes, retention, producers
(its records' validation: test_records.py; compaction: test_cleaner.py)."""

from __future__ import annotations

from pathlib import Path

import kafka.errors as Errors
import pytest
from kafka.record.default_records import DefaultRecordBatch
from support.partition_log import append, batch, config

from kafka_dr_dev.local.broker.log import PartitionLog
from kafka_dr_dev.local.broker.records import parse_header


def offsets(data: bytes) -> list[int]:
    out, pos = [], 0
    while pos < len(data):
        header = parse_header(data, pos)
        out += [r.offset for r in DefaultRecordBatch(data[pos : pos + header.length])]
        pos += header.length
    return out


def test_append_assigns_exact_offsets_and_reads_whole_batches(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0", config())
    assert [append(log, batch(n)) for n in (3, 5, 2)] == [0, 3, 8]
    assert log.high_watermark == 10
    assert offsets(log.read(4, 1 << 20, log.high_watermark)) == list(range(3, 10))
    assert offsets(log.read(0, 1, log.high_watermark)) == [0, 1, 2]  # first batch even past max_bytes
    assert log.read(10, 1 << 20, log.high_watermark) == b""
    with pytest.raises(Errors.OffsetOutOfRangeError):
        log.read(11, 1 << 20, log.high_watermark)


def test_records_come_back_byte_for_byte_with_every_codec(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0", config())
    for codec in range(5):  # none, gzip, snappy, lz4, zstd
        append(log, batch(4, compression=codec))
    records = list(DefaultRecordBatch(log.read(16, 1 << 20, 20)))
    assert [(r.key, r.value, r.headers, r.timestamp) for r in records] == [
        (f"k{i}".encode(), f"v{i}".encode(), [("h", b"x")], 1000 + i) for i in range(4)
    ]


def test_reopen_rebuilds_the_index(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0", config())
    for _ in range(10):
        append(log, batch(7))
    log.close()
    reopened = PartitionLog(tmp_path / "t-0", config())
    assert reopened.high_watermark == 70
    assert offsets(reopened.read(69, 1 << 20, 70)) == list(range(63, 70))


def test_torn_write_is_truncated_at_the_last_whole_batch(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0", config())
    for _ in range(3):
        append(log, batch(5))
    segment = log.segments[0].path
    log.close()
    with open(segment, "ab") as f:
        f.write(batch(5)[:40])  # a crash in the middle of a write
    recovered = PartitionLog(tmp_path / "t-0", config())
    assert recovered.high_watermark == 15
    assert append(recovered, batch(1)) == 15


def test_corrupt_batch_truncates_the_rest(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0", config())
    sizes = [len(batch(5))] * 3
    for _ in range(3):
        append(log, batch(5))
    segment = log.segments[0].path
    log.close()
    data = bytearray(segment.read_bytes())
    data[sizes[0] + 70] ^= 0xFF  # flip a byte inside the second batch's records
    segment.write_bytes(bytes(data))
    recovered = PartitionLog(tmp_path / "t-0", config())
    assert recovered.high_watermark == 5


def test_segments_roll_and_retention_deletes_closed_ones(tmp_path: Path) -> None:
    size = len(batch(10))
    log = PartitionLog(tmp_path / "t-0", config({"segment.bytes": str(size * 2), "retention.bytes": str(size * 3)}))
    for _ in range(8):
        append(log, batch(10))
    assert len(log.segments) == 4
    removed = log.enforce_retention(now_ms=2000)
    assert removed == 40 and log.log_start_offset == 40
    with pytest.raises(Errors.OffsetOutOfRangeError):
        log.read(0, 100, log.high_watermark)
    log.close()
    assert PartitionLog(tmp_path / "t-0", config()).log_start_offset == 40


def test_time_retention_uses_the_segment_max_timestamp(tmp_path: Path) -> None:
    size = len(batch(10))
    log = PartitionLog(tmp_path / "t-0", config({"segment.bytes": str(size), "retention.ms": "1000"}))
    append(log, batch(10, ts=1000))
    append(log, batch(10, ts=5000))
    append(log, batch(10, ts=9000))
    assert log.enforce_retention(now_ms=5500) == 10  # only the first segment is older than 1 s
    assert log.log_start_offset == 10


def test_delete_records_moves_the_log_start_and_survives_restart(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0", config())
    for _ in range(4):
        append(log, batch(5))
    assert log.delete_records_before(7) == 7
    with pytest.raises(Errors.OffsetOutOfRangeError):
        log.delete_records_before(21)
    log.close()
    assert PartitionLog(tmp_path / "t-0", config()).log_start_offset == 7


def test_offset_for_timestamp_is_the_first_record_at_or_after(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0", config())
    append(log, batch(5, ts=100))  # 100..104
    append(log, batch(5, ts=200))  # 200..204
    assert log.offset_for_timestamp(0) == (0, 100)
    assert log.offset_for_timestamp(103) == (3, 103)
    assert log.offset_for_timestamp(150) == (5, 200)
    assert log.offset_for_timestamp(204) == (9, 204)
    assert log.offset_for_timestamp(205) is None
    assert log.max_timestamp_offset() == (9, 204)


def test_idempotent_retry_returns_the_original_offset(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0", config())
    first = batch(3, pid=7, epoch=0, seq=0)
    assert append(log, first) == 0
    assert append(log, batch(2, pid=7, epoch=0, seq=3)) == 3
    assert append(log, first) == 0  # a retry: not appended again
    assert log.high_watermark == 5
    with pytest.raises(Errors.OutOfOrderSequenceNumberError):
        append(log, batch(1, pid=7, epoch=0, seq=9))
    log.close()
    reopened = PartitionLog(tmp_path / "t-0", config())  # producer state is rebuilt from the log
    assert append(reopened, batch(2, pid=7, epoch=0, seq=3)) == 3
    with pytest.raises(Errors.OutOfOrderSequenceNumberError):
        append(reopened, batch(1, pid=7, epoch=1, seq=4))  # a new epoch must restart at sequence 0
    assert append(reopened, batch(1, pid=7, epoch=1, seq=0)) == 5
    with pytest.raises(Errors.InvalidProducerEpochError):
        append(reopened, batch(1, pid=7, epoch=0, seq=5))  # the old epoch is fenced


def test_aborted_transactions_and_last_stable_offset(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0", config())
    append(log, batch(3, pid=9, epoch=0, seq=0, txn=True))
    assert log.last_stable_offset == 0 and log.high_watermark == 3
    log.append_marker(9, 0, commit=False, coordinator_epoch=0, now_ms=1)
    assert log.last_stable_offset == 4
    append(log, batch(2, pid=9, epoch=0, seq=3, txn=True))
    log.append_marker(9, 0, commit=True, coordinator_epoch=0, now_ms=2)
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in log.aborted] == [(9, 0, 3)]
    log.close()
    reopened = PartitionLog(tmp_path / "t-0", config())
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in reopened.aborted] == [(9, 0, 3)]
    assert reopened.last_stable_offset == reopened.high_watermark == 7
    assert [a.first_offset for a in reopened.aborted_between(4, 7)] == []
    assert [a.first_offset for a in reopened.aborted_between(0, 2)] == [0]


def test_segments_roll_on_segment_ms_of_record_time(tmp_path: Path) -> None:
    """Kafka's shouldRoll: a batch whose max timestamp is more than segment.ms after the active segment's first batch
    starts a new segment, markers included; without timestamps, the wall clock since the segment was opened counts."""
    log = PartitionLog(tmp_path / "t-0", config({"segment.ms": "1000"}))
    append(log, batch(1, ts=1000))  # 0
    append(log, batch(1, ts=2000))  # 1: exactly segment.ms later, same segment
    append(log, batch(1, ts=2001))  # 2: rolls
    append(log, batch(1, ts=500))  # 3: older than the segment, same segment
    log.append_marker(9, 0, commit=True, coordinator_epoch=0, now_ms=3002)  # 4: rolls
    assert [s.base_offset for s in log.segments] == [0, 2, 4]
    log.close()
    reopened = PartitionLog(tmp_path / "t-0", config({"segment.ms": "1000"}))
    append(reopened, batch(1, ts=4003))  # 5: the segment's first timestamp (3002) is read back from disk
    assert [s.base_offset for s in reopened.segments] == [0, 2, 4, 5]
    append(reopened, batch(1, ts=-1))  # 6: a batch without a timestamp never rolls a timed segment
    assert [s.base_offset for s in reopened.segments] == [0, 2, 4, 5]

    untimed = PartitionLog(tmp_path / "u-0", config({"segment.ms": "1000"}))
    append(untimed, batch(1, ts=-1))
    append(untimed, batch(1, ts=-1))
    untimed.segments[-1].opened_ms -= 1001  # opened more than segment.ms ago
    append(untimed, batch(1, ts=-1))
    assert [s.base_offset for s in untimed.segments] == [0, 2]


def test_retention_never_deletes_from_a_compacted_topic(tmp_path: Path) -> None:
    """retention.ms applies to cleanup.policy=delete only: a compacted log keeps each key's newest record forever."""
    size = len(batch(10))
    overrides = {"segment.bytes": str(size), "retention.ms": "1000", "cleanup.policy": "compact"}
    log = PartitionLog(tmp_path / "t-0", config(overrides))
    for _ in range(3):
        append(log, batch(10, ts=1000))
    assert log.enforce_retention(now_ms=10**9) == 0
    assert log.log_start_offset == 0 and len(log.segments) == 3
    both = PartitionLog(tmp_path / "u-0", config({**overrides, "cleanup.policy": "compact,delete"}))
    for _ in range(3):
        append(both, batch(10, ts=1000))
    assert both.enforce_retention(now_ms=10**9) == 30
