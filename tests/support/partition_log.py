"""Record batches for the embedded broker's partition log, and appends done as the broker's produce path does them
(validate, producer check, stamp the offset)."""

from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatchBuilder

from kafka_dr_dev.local.broker.log import PartitionLog
from kafka_dr_dev.local.broker.records import assign_offset, parse_header, validate_single_batch
from kafka_dr_dev.local.broker.topics import TOPIC_CONFIGS


def batch(
    count: int, ts: int = 1000, pid: int = -1, epoch: int = -1, seq: int = -1, txn: bool = False, compression: int = 0
) -> bytes:
    builder = DefaultRecordBatchBuilder(2, compression, txn, pid, epoch, seq, 1 << 20)
    for i in range(count):
        builder.append(i, ts + i, f"k{i}".encode(), f"v{i}".encode(), [("h", b"x")])
    return bytes(builder.build())


def config(overrides: dict[str, str] | None = None):
    return lambda name: (overrides or {}).get(name, TOPIC_CONFIGS[name][0])


def append(log: PartitionLog, data: bytes) -> int:
    header = validate_single_batch(data)
    duplicate = log.check_producer(header)
    if duplicate is not None:
        return duplicate
    stamped = assign_offset(data, log.log_end_offset)
    return log.append(stamped, parse_header(stamped))


def keyed(pairs: list[tuple[bytes, bytes | None]], ts: int = 1000) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    for i, (key, value) in enumerate(pairs):
        builder.append(i, ts + i, key, value, [])
    return bytes(builder.build())
