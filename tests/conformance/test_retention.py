"""Time-based retention (retention.ms) on a broker whose retention check runs every few hundred ms.

Apache Kafka deletes log segments whose newest record is older than retention.ms; when every segment
is expired it first rolls a new, empty active segment, so the log start offset reaches the log end
offset.  Needs broker configs (log.retention.check.interval.ms, log.initial.task.delay.ms), so it only
runs against an embedded broker."""

from __future__ import annotations

import pytest

from .clients import CLIENT_NAMES, Record, make_client, past_ts, unique, wait_for_value

pytestmark = pytest.mark.integration

RETENTION_CONFIGS = {"log.retention.check.interval.ms": "300", "log.initial.task.delay.ms": "0"}


@pytest.fixture(scope="module")
def retention_broker(broker_factory):
    return broker_factory.start_configured("retention", RETENTION_CONFIGS)


@pytest.mark.parametrize("client_name", CLIENT_NAMES)
def test_expired_records_are_deleted(retention_broker, client_name):
    c = make_client(client_name, retention_broker.bootstrap)
    expired, fresh = unique("expired"), unique("fresh")
    try:
        for topic in (expired, fresh):
            c.create_topic(topic, 1, configs={"retention.ms": "3600000"})
        c.produce(
            expired,
            [Record(key=None, value=b"old-%d" % i, timestamp_ms=past_ts(48) + i, partition=0) for i in range(50)],
            batch_records=10,
        )
        c.produce(
            fresh,
            [Record(key=None, value=b"new-%d" % i, timestamp_ms=past_ts(0.01) + i, partition=0) for i in range(50)],
            batch_records=10,
        )
        wait_for_value(lambda: c.watermarks(expired, 0), (50, 50), 6, "watermarks of the expired topic")
        assert c.watermarks(fresh, 0) == (0, 50)
        # The log goes on after the deleted offsets.
        assert c.produce(expired, [Record(key=None, value=b"later", timestamp_ms=past_ts(0.01), partition=0)]) == [
            (0, 50)
        ]
        assert [g.value for g in c.consume(expired, 0, 0, 1, reset="earliest")] == [b"later"]
    finally:
        c.close()


@pytest.mark.parametrize("client_name", CLIENT_NAMES)
def test_retention_bytes_deletes_oldest_segments(retention_broker, client_name):
    """retention.bytes: whole oldest segments go while the log stays at least retention.bytes big.

    25 batches of ~100 KB with segment.bytes=1 MiB make segments [0-9] [10-19] [20-24] (~2.5 MB);
    with retention.bytes=1.5 MB only the first segment can go, so the log start offset becomes 10."""
    c = make_client(client_name, retention_broker.bootstrap)
    topic = unique("sized")
    try:
        c.create_topic(topic, 1, configs={"segment.bytes": "1048576", "retention.bytes": "1500000"})
        ts = past_ts(0.01)
        records = [Record(key=None, value=bytes([i]) * 100_000, timestamp_ms=ts + i, partition=0) for i in range(25)]
        assert c.produce(topic, records, batch_records=1) == [(0, i) for i in range(25)]
        wait_for_value(lambda: c.watermarks(topic, 0), (10, 25), 15, "watermarks after size-based retention")
        got = c.consume(topic, 0, 10, 15)
        assert [g.value for g in got] == [r.value for r in records[10:]]
    finally:
        c.close()


@pytest.mark.parametrize("client_name", CLIENT_NAMES)
def test_expired_segments_before_fresh_data_are_deleted(retention_broker, client_name):
    """retention.ms with several segments: the two segments of 48h-old records go (segment.bytes=1 MiB,
    ~100 KB batches: [0-9] [10-19]); the segment holding fresh records stays, so the start is 20."""
    c = make_client(client_name, retention_broker.bootstrap)
    topic = unique("aged")
    try:
        # Retention is switched on only once every record is in: a check between two produces could
        # otherwise roll and drop a segment holding only old records early (as Kafka does), moving the start.
        c.create_topic(topic, 1, configs={"segment.bytes": "1048576", "retention.ms": "-1"})
        old, fresh = past_ts(48), past_ts(0.01)
        records = [
            Record(key=None, value=bytes([i]) * 100_000, timestamp_ms=(old if i < 20 else fresh) + i, partition=0)
            for i in range(25)
        ]
        assert c.produce(topic, records, batch_records=1) == [(0, i) for i in range(25)]
        c.alter_config(topic, "retention.ms", "3600000")
        wait_for_value(lambda: c.watermarks(topic, 0), (20, 25), 15, "watermarks after time-based retention")
        assert [g.offset for g in c.consume(topic, 0, 0, 5, reset="earliest")] == list(range(20, 25))
    finally:
        c.close()
