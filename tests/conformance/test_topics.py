"""Topic lifecycle and per-topic log behaviour: duplicate create, delete and recreate, auto-creation,
max.message.bytes, large records, LogAppendTime."""

from __future__ import annotations

import struct
import time

import pytest

from . import kafka_wire as wire
from .clients import LOG_APPEND_TIME, ProduceError, Record, past_ts, unique, wait_until

pytestmark = pytest.mark.integration

MESSAGE_TOO_LARGE = 10
UNKNOWN_TOPIC_OR_PARTITION = 3


def test_create_existing_topic_fails(client):
    topic = unique("dup")
    client.create_topic(topic, 2)
    with pytest.raises(Exception, match="(?i)TOPIC_ALREADY_EXISTS|TopicAlreadyExists|already exists"):
        client.create_topic(topic, 3)
    assert client.partition_count(topic) == 2


def test_delete_and_recreate_topic(client, all_clients):
    topic = unique("del")
    client.create_topic(topic, 2)
    ts = past_ts()
    client.produce(topic, [Record(key=b"k", value=b"old", timestamp_ms=ts, partition=0)] * 5)
    client.delete_topic(topic)
    for name, c in all_clients.items():
        wait_until(lambda c=c: c.partition_count(topic) == -1, 15, message=f"{name}: topic gone from metadata")
    client.create_topic(topic, 1)
    for name, c in all_clients.items():
        c.wait_for_partitions(topic, 1)
        assert c.watermarks(topic, 0) == (0, 0), name
    assert client.produce(topic, [Record(key=b"k", value=b"new", timestamp_ms=ts, partition=0)]) == [(0, 0)]
    assert [g.value for g in client.consume(topic, 0, 0, None)] == [b"new"]


def test_metadata_request_auto_creates_topic(client, bootstrap):
    """Apache Kafka's default auto.create.topics.enable=true: a Metadata request that allows it creates an
    unknown topic with num.partitions (default 1)."""
    topic = unique("auto")
    body = struct.pack(">i", 1) + struct.pack(">h", len(topic)) + topic.encode() + b"\x01"  # Metadata v4
    with wire.connect(bootstrap) as s:
        wire.call(s, wire.frame(wire.request_header(wire.METADATA, 4, 1) + body))
    client.wait_for_partitions(topic, 1)
    ts = past_ts()
    assert client.produce(topic, [Record(key=None, value=b"v", timestamp_ms=ts, partition=0)]) == [(0, 0)]


def test_max_message_bytes_enforced(client, bootstrap):
    topic = unique("maxmsg")
    client.create_topic(topic, 1, configs={"max.message.bytes": "2000"})
    ts = past_ts()
    assert client.produce(topic, [Record(key=None, value=b"x" * 1500, timestamp_ms=ts, partition=0)]) == [(0, 0)]
    with pytest.raises(ProduceError) as info:
        client.produce(topic, [Record(key=None, value=b"y" * 5000, timestamp_ms=ts, partition=0)])
    text = str(info.value.errors).lower().replace("_", "").replace(" ", "")
    assert "toolarge" in text, info.value.errors
    # The exact error code, on the wire.
    with wire.connect(bootstrap) as s:
        batch = wire.encode_batch([b"z" * 5000], base_timestamp=ts)
        _, err, _ = wire.parse_produce_v3(wire.call(s, wire.produce_v3(topic, 0, batch, 9)))
    assert err == MESSAGE_TOO_LARGE
    assert client.watermarks(topic, 0) == (0, 1)


def test_produce_to_missing_partition_fails_on_the_wire(client, bootstrap):
    topic = unique("nopart")
    client.create_topic(topic, 2)
    with wire.connect(bootstrap) as s:
        batch = wire.encode_batch([b"v"], base_timestamp=past_ts())
        _, err, _ = wire.parse_produce_v3(wire.call(s, wire.produce_v3(topic, 7, batch, 3)))
        assert err == UNKNOWN_TOPIC_OR_PARTITION
    assert client.partition_count(topic) == 2


def test_produce_to_missing_topic_does_not_create_it(client, bootstrap):
    """Only Metadata requests auto-create topics in Kafka; a Produce for an unknown topic gets
    UNKNOWN_TOPIC_OR_PARTITION (3) and creates nothing."""
    topic = unique("missing-topic")
    with wire.connect(bootstrap) as s:
        batch = wire.encode_batch([b"v"], base_timestamp=past_ts())
        _, err, _ = wire.parse_produce_v3(wire.call(s, wire.produce_v3(topic, 0, batch, 4)))
    assert err == UNKNOWN_TOPIC_OR_PARTITION
    assert client.partition_count(topic) == -1


def test_large_record_roundtrip(client, all_clients, bootstrap):
    topic = unique("large")
    client.create_topic(topic, 1)
    ts = past_ts()
    big = bytes(range(256)) * 3500  # 896000 bytes, under the default max.message.bytes (1048588)
    records = [
        Record(key=b"big", value=big, timestamp_ms=ts, partition=0),
        Record(key=b"small", value=b"s", timestamp_ms=ts + 1, partition=0),
    ]
    assert client.produce(topic, records) == [(0, 0), (0, 1)]
    for name, c in all_clients.items():
        got = c.consume(topic, 0, 0, 2)
        assert [g.content() for g in got] == [(r.key, r.value, r.headers, r.timestamp_ms) for r in records], name
    # KIP-74: a fetch returns the first batch even when it is larger than the fetch size limits.
    with wire.connect(bootstrap) as s:
        resp = wire.parse_fetch_v4(wire.call(s, wire.fetch_v4(topic, 0, 0, 5, max_bytes=1000)))
    assert resp["error_code"] == 0
    first = wire.decode_batch_headers(resp["records"])
    assert first and first[0]["base_offset"] == 0 and first[0]["crc_ok"], "the oversized first batch was not returned"


def test_log_append_time_topic(client, all_clients, bootstrap):
    topic = unique("lat")
    client.create_topic(topic, 1, configs={"message.timestamp.type": "LogAppendTime"})
    old = past_ts(48)
    before = int(time.time() * 1000)
    records = [Record(key=None, value=f"v{i}".encode(), timestamp_ms=old + i, partition=0) for i in range(20)]
    client.produce(topic, records, batch_records=10)
    after = int(time.time() * 1000)
    batches = wire.fetch_all_batches(bootstrap, topic, 0)
    assert all(b["timestamp_type"] == 1 for b in batches)
    stored = [(b["base_offset"], b["count"]) for b in batches]
    wire.assert_stored_as_flushed(stored, 10, len(records))
    for name, c in all_clients.items():
        got = c.consume(topic, 0, 0, 20)
        assert all(g.timestamp_type == LOG_APPEND_TIME for g in got), (name, {g.timestamp_type for g in got})
        assert all(before - 1000 <= g.timestamp_ms <= after + 1000 for g in got), (name, got[0].timestamp_ms)
        # The broker stamps a batch once: its records share one append time.
        assert all(len({g.timestamp_ms for g in got[base : base + count]}) == 1 for base, count in stored), name
        # Lookups by time use the append time, not the producer's CreateTime.
        assert c.offsets_for_times(topic, 0, old) == 0, name
        first_at = next(i for i, g in enumerate(got) if g.timestamp_ms == got[10].timestamp_ms)
        assert c.offsets_for_times(topic, 0, got[10].timestamp_ms) == first_at, name
        assert c.offsets_for_times(topic, 0, after + 60_000) == -1, name


@pytest.mark.parametrize(
    "name, partitions",
    [("bad name!", 1), ("..", 1), ("x" * 250, 1), ("ok-name", 0)],
    ids=["illegal-chars", "dotdot", "too-long", "zero-partitions"],
)
def test_invalid_create_topics_refused(client, name, partitions):
    """Kafka refuses illegal names (INVALID_TOPIC_EXCEPTION) and zero partitions (INVALID_PARTITIONS)."""
    topic = name if name != "ok-name" else unique("zero")
    with pytest.raises(Exception):  # noqa: B017 - each client raises its own exception type
        client.create_topic(topic, partitions)
    assert client.partition_count(topic) == -1


def test_replication_factor_above_broker_count_refused(client):
    topic = unique("rf")
    with pytest.raises(Exception, match="(?i)INVALID_REPLICATION_FACTOR|InvalidReplicationFactor|replication"):
        client.create_topic(topic, 1, replication_factor=len(client.brokers()) + 1)
    assert client.partition_count(topic) == -1
