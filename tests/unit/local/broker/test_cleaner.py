"""The embedded broker's log compaction on a real partition log in a temporary folder."""

from __future__ import annotations

from pathlib import Path

from kafka.record.default_records import DefaultRecordBatch
from support.partition_log import append, config, keyed

from kafka_dr.local.broker import cleaner
from kafka_dr.local.broker.log import PartitionLog


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
