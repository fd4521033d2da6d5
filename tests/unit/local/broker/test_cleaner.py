"""The embedded broker's log compaction on a real partition log in a temporary folder: newest record per key,
transaction markers and aborted records, merged segments, and what a restart reads back."""

from __future__ import annotations

from pathlib import Path

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from support.partition_log import append, config, keyed

from kafka_dr_dev.local.broker import cleaner
from kafka_dr_dev.local.broker.log import PartitionLog
from kafka_dr_dev.local.broker.records import parse_header


def test_compaction_keeps_the_newest_per_key_and_drops_old_tombstones(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0", config({"segment.bytes": "1"}))  # one batch per segment
    append(log, keyed([(b"a", b"1"), (b"b", b"1")]))  # offsets 0, 1
    append(log, keyed([(b"a", b"2"), (b"c", None)], ts=10))  # 2, 3 (c: an old tombstone)
    append(log, keyed([(b"b", b"2")], ts=5000))  # 4
    append(log, keyed([(b"a", b"3")]))  # 5: the active segment, never cleaned
    removed = cleaner.clean(log, now_ms=2000, delete_retention_ms=1000)
    remaining = [
        (r.offset, r.key, r.value)
        for s in log.segments
        for j in range(len(s.positions))
        for r in DefaultRecordBatch(PartitionLog.batch_bytes(s, j))
    ]
    assert remaining == [(2, b"a", b"2"), (4, b"b", b"2"), (5, b"a", b"3")]
    assert removed == 3 and log.high_watermark == 6
    log.close()
    assert PartitionLog(tmp_path / "t-0", config()).high_watermark == 6  # cleaned segments recover


PID = 7


def txn(log: PartitionLog, pairs: list[tuple[bytes, bytes]], seq: int, ts: int = 1000) -> int:
    """Append a transactional batch of producer PID."""
    builder = DefaultRecordBatchBuilder(2, 0, True, PID, 0, seq, 1 << 20)
    for i, (key, value) in enumerate(pairs):
        builder.append(i, ts + i, key, value, [])
    return append(log, bytes(builder.build()))


def fetched(log: PartitionLog) -> list[tuple[int, bytes | None]]:
    """(offset, key or None for a marker) of every record a consumer fetches from the log start, as it fetches:
    from the last offset received plus one, across emptied segments and offset gaps."""
    out: list[tuple[int, bytes | None]] = []
    offset = log.log_start_offset
    while offset < log.high_watermark:
        data = log.read(offset, 1 << 20, log.high_watermark)
        assert data, f"nothing fetched at {offset}"
        pos = 0
        while pos < len(data):
            header = parse_header(data, pos)
            records = DefaultRecordBatch(data[pos : pos + header.length])
            out += [(r.offset, None if header.is_control else r.key) for r in records]
            offset = header.last_offset + 1
            pos += header.length
    return out


def state(log: PartitionLog) -> tuple:
    return (
        fetched(log),
        log.log_start_offset,
        log.high_watermark,
        log.last_stable_offset,
        log.aborted,
        log.ongoing_txns,
        [s.base_offset for s in log.segments],
    )


def test_markers_of_cleaned_transactions_go_after_delete_retention(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0", config({"segment.bytes": "1"}))  # one batch per segment
    txn(log, [(b"a", b"1")], seq=0)  # 0
    log.append_marker(PID, 0, commit=True, coordinator_epoch=0, now_ms=1000)  # 1
    txn(log, [(b"a", b"2")], seq=1)  # 2
    log.append_marker(PID, 0, commit=True, coordinator_epoch=0, now_ms=1000)  # 3
    append(log, keyed([(b"b", b"1")]))  # 4: the active segment
    assert cleaner.clean(log, now_ms=1500, delete_retention_ms=1000) == 1  # a@0; marker 1 is not 1 s old yet
    assert fetched(log) == [(1, None), (2, b"a"), (3, None), (4, b"b")]
    assert cleaner.clean(log, now_ms=2500, delete_retention_ms=1000) == 1  # marker 1, its transaction emptied
    assert fetched(log) == [(2, b"a"), (3, None), (4, b"b")]  # marker 3 stays with a@2
    assert [s.base_offset for s in log.segments] == [0, 2, 3, 4]  # 0 and 1, emptied, are one empty segment
    assert log.segments[0].size == 0
    assert (log.log_start_offset, log.high_watermark, log.last_stable_offset) == (0, 5, 5)
    before = state(log)
    log.close()
    assert state(PartitionLog(tmp_path / "t-0", config({"segment.bytes": "1"}))) == before


def test_aborted_records_go_with_their_marker_and_never_hide_the_committed_value(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0", config({"segment.bytes": "1"}))  # one batch per segment
    txn(log, [(b"a", b"committed")], seq=0)  # 0
    log.append_marker(PID, 0, commit=True, coordinator_epoch=0, now_ms=1000)  # 1
    txn(log, [(b"a", b"aborted")], seq=1)  # 2
    log.append_marker(PID, 0, commit=False, coordinator_epoch=0, now_ms=1000)  # 3: the active segment
    # The abort marker is outside the cleanable range: its records stay, listed for read_committed readers, and the
    # aborted a@2 is not the newest a: the committed a@0 (and so its marker) stays.
    assert cleaner.clean(log, now_ms=5000, delete_retention_ms=1000) == 0
    assert fetched(log) == [(0, b"a"), (1, None), (2, b"a"), (3, None)]
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in log.aborted_between(0, 4)] == [(PID, 2, 3)]

    append(log, keyed([(b"b", b"1")]))  # 4: the abort marker's segment closes
    assert cleaner.clean(log, now_ms=1500, delete_retention_ms=1000) == 1  # a@2; its marker is not 1 s old yet
    assert fetched(log) == [(0, b"a"), (1, None), (3, None), (4, b"b")]
    assert log.aborted == []  # nothing left for read_committed readers to skip
    before = state(log)
    log.close()
    log = PartitionLog(tmp_path / "t-0", config({"segment.bytes": "1"}))
    assert state(log) == before
    assert cleaner.clean(log, now_ms=5000, delete_retention_ms=1000) == 1  # the abort marker
    assert fetched(log) == [(0, b"a"), (1, None), (4, b"b")]
    assert (log.log_start_offset, log.high_watermark, log.last_stable_offset) == (0, 5, 5)


def test_cleaned_segments_merge_up_to_segment_bytes(tmp_path: Path) -> None:
    """A log rolled every segment.ms keeps a few segments: the cleaner merges what stays, as Kafka's does."""
    log = PartitionLog(tmp_path / "t-0", config({"segment.ms": "100"}))
    for i in range(10):
        append(log, keyed([(b"k%d" % (i % 2), b"v%d" % i)], ts=1000 + 200 * i))  # a segment each
    assert len(log.segments) == 10
    assert cleaner.clean(log, now_ms=10**6, delete_retention_ms=1000) == 7
    assert [s.base_offset for s in log.segments] == [0, 9]
    assert fetched(log) == [(7, b"k1"), (8, b"k0"), (9, b"k1")]
    before = state(log)
    log.close()
    assert state(PartitionLog(tmp_path / "t-0", config({"segment.ms": "100"}))) == before


def test_restart_finishes_a_swap_and_drops_a_half_written_segment(tmp_path: Path) -> None:
    """A crash while replacing segments: a whole `.swap` replaces the segments in its range, a `.cleaned` file (not
    yet renamed to `.swap`) is dropped."""
    log = PartitionLog(tmp_path / "t-0", config({"segment.bytes": "1"}))
    for value in (b"1", b"2", b"3"):
        append(log, keyed([(b"a", value)]))  # segments 0, 1, 2
    merged = PartitionLog.batch_bytes(log.segments[1], 0)  # segments 0 and 1 cleaned: a@1 alone
    log.close()
    (tmp_path / "t-0" / f"{0:020d}.{2:020d}.swap").write_bytes(merged)
    (tmp_path / "t-0" / f"{2:020d}.cleaned").write_bytes(b"torn")
    log = PartitionLog(tmp_path / "t-0", config({"segment.bytes": "1"}))
    assert [s.base_offset for s in log.segments] == [0, 2]
    assert fetched(log) == [(1, b"a"), (2, b"a")]
    assert sorted(p.name for p in (tmp_path / "t-0").iterdir()) == [f"{0:020d}.log", f"{2:020d}.log"]


def test_an_emptied_segment_does_not_hold_back_time_retention(tmp_path: Path) -> None:
    """cleanup.policy=compact,delete: a segment the cleaner emptied has no timestamp left, yet expires like the
    segments after it (Kafka falls back on the file's age)."""
    overrides = {"segment.bytes": "1", "cleanup.policy": "compact,delete", "retention.ms": "1000"}
    log = PartitionLog(tmp_path / "t-0", config(overrides))
    for value in (b"1", b"2", b"3"):
        append(log, keyed([(b"a", value)], ts=1000))  # segments 0, 1, 2
    append(log, keyed([(b"b", b"1")], ts=5000))  # 3: the active segment
    assert cleaner.clean(log, now_ms=2000, delete_retention_ms=1000) == 2
    assert [s.size == 0 for s in log.segments] == [True, False, False]  # 0 and 1 emptied, as one segment
    assert log.enforce_retention(now_ms=5500) == 3
    assert log.log_start_offset == 3 and fetched(log) == [(3, b"b")]
