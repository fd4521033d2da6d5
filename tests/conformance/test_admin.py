"""Admin APIs: CreatePartitions, DescribeConfigs / IncrementalAlterConfigs, DeleteRecords."""

from __future__ import annotations

import pytest

from .clients import OffsetOutOfRange, Record, past_ts, unique

pytestmark = pytest.mark.integration

# Apache Kafka's documented topic-level defaults (used when a config is reported as DEFAULT_CONFIG).
KAFKA_TOPIC_DEFAULTS = {
    "cleanup.policy": "delete",
    "compression.type": "producer",
    "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000",
    "index.interval.bytes": "4096",
    "max.message.bytes": "1048588",
    "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5",
    "min.insync.replicas": "1",
    "preallocate": "false",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "segment.index.bytes": "10485760",
    "segment.jitter.ms": "0",
    "segment.ms": "604800000",
    "unclean.leader.election.enable": "false",
}


def test_create_partitions_grows_topic(client, all_clients):
    topic = unique("grow")
    client.create_topic(topic, 2)
    client.produce(topic, [Record(key=b"k", value=b"before", timestamp_ms=past_ts(), partition=1)])
    client.create_partitions(topic, 5)
    for name, c in all_clients.items():
        c.wait_for_partitions(topic, 5)
        assert c.partition_count(topic) == 5, name
    ts = past_ts()
    assert client.produce(topic, [Record(key=b"k4", value=b"p4", timestamp_ms=ts, partition=4)]) == [(4, 0)]
    for name, c in all_clients.items():
        assert c.watermarks(topic, 4) == (0, 1), name
        [got] = c.consume(topic, 4, 0, 1)
        assert got.content() == (b"k4", b"p4", (), ts), name
        assert c.watermarks(topic, 1) == (0, 1), name  # old partitions untouched
    # Shrinking is refused (INVALID_PARTITIONS).
    with pytest.raises(Exception):  # noqa: B017 - each client raises its own exception type
        client.create_partitions(topic, 3)
    assert client.partition_count(topic) == 5


def test_describe_and_alter_configs(client, all_clients):
    topic = unique("cfg")
    client.create_topic(topic, 1, configs={"max.message.bytes": "2000000"})
    client.alter_config(topic, "retention.ms", "123456789")
    for name, c in all_clients.items():
        configs = c.describe_configs(topic)
        ret = configs["retention.ms"]
        assert (ret.value, ret.source, ret.is_default) == ("123456789", "DYNAMIC_TOPIC_CONFIG", False), (name, ret)
        mmb = configs["max.message.bytes"]
        assert (mmb.value, mmb.source, mmb.is_default) == ("2000000", "DYNAMIC_TOPIC_CONFIG", False), (name, mmb)
        dynamic = {k for k, v in configs.items() if v.source == "DYNAMIC_TOPIC_CONFIG"}
        assert dynamic == {"retention.ms", "max.message.bytes"}, (name, dynamic)
        for key in (
            "cleanup.policy",
            "compression.type",
            "message.timestamp.type",
            "segment.bytes",
            "retention.bytes",
            "min.insync.replicas",
        ):
            assert key in configs, (name, key)
            assert configs[key].source in ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG"), (name, configs[key])
        for key, cv in configs.items():
            if cv.source == "DEFAULT_CONFIG" and key in KAFKA_TOPIC_DEFAULTS:
                assert cv.value == KAFKA_TOPIC_DEFAULTS[key], (name, cv)
                assert cv.is_default, (name, cv)
    # Incremental alter of one key leaves the other overrides alone.
    client.alter_config(topic, "retention.ms", "3600000")
    for name, c in all_clients.items():
        configs = c.describe_configs(topic)
        assert configs["retention.ms"].value == "3600000", name
        assert configs["max.message.bytes"].value == "2000000", name
    # A value that does not parse is refused (INVALID_CONFIG) and changes nothing.
    with pytest.raises(Exception):  # noqa: B017 - each client raises its own exception type
        client.alter_config(topic, "retention.ms", "not-a-number")
    assert client.describe_configs(topic)["retention.ms"].value == "3600000"


def test_delete_records_moves_log_start_offset(client, all_clients):
    topic = unique("delrec")
    client.create_topic(topic, 1)
    base = past_ts()
    records = [Record(key=None, value=f"v{i}".encode(), timestamp_ms=base + i, partition=0) for i in range(100)]
    client.produce(topic, records, batch_records=10)
    assert client.delete_records(topic, 0, 37) == 37  # in the middle of a batch
    for name, c in all_clients.items():
        assert c.watermarks(topic, 0) == (37, 100), name
        assert c.list_offsets(topic, 0, "earliest") == 37, name
        got = c.consume(topic, 0, 37, 3)
        assert [(g.offset, g.value) for g in got] == [(37, b"v37"), (38, b"v38"), (39, b"v39")], name
        # Below the log start: an out-of-range fetch, then the auto reset to the new start.
        got = c.consume(topic, 0, 5, 2, reset="earliest")
        assert [g.offset for g in got] == [37, 38], name
        with pytest.raises(OffsetOutOfRange):
            c.consume(topic, 0, 5, 1, reset="none", timeout=15)
        # Past the high watermark is out of range too (the HW itself is a valid, empty position).
        with pytest.raises(OffsetOutOfRange):
            c.consume(topic, 0, 105, 1, reset="none", timeout=15)
        assert [g.offset for g in c.consume(topic, 0, 105, 1, reset="earliest")] == [37], name
    # Deleting below the current start is a no-op; -1 means "up to the high watermark".
    assert client.delete_records(topic, 0, 10) == 37
    assert client.delete_records(topic, 0, -1) == 100
    assert client.watermarks(topic, 0) == (100, 100)
    assert client.produce(topic, [Record(key=None, value=b"after", timestamp_ms=base, partition=0)]) == [(0, 100)]
    # Past the high watermark: OFFSET_OUT_OF_RANGE.
    with pytest.raises(Exception):  # noqa: B017 - each client raises its own exception type
        client.delete_records(topic, 0, 1000)
    assert client.watermarks(topic, 0) == (100, 101)


def test_offsets_for_times_after_delete_records(client, all_clients):
    """ListOffsets by timestamp never answers an offset below the log start offset, and the answer is
    the first record >= the log start offset, even in the middle of a batch (Kafka:
    FileRecords.searchForTimestamp requires record.offset() >= startingOffset)."""
    topic = unique("delrec-ts")
    client.create_topic(topic, 1)
    base = past_ts()
    records = [Record(key=None, value=f"v{i}".encode(), timestamp_ms=base + i, partition=0) for i in range(100)]
    client.produce(topic, records, batch_records=10)
    assert client.delete_records(topic, 0, 37) == 37
    for name, c in all_clients.items():
        assert c.offsets_for_times(topic, 0, 0) == 37, name
        assert c.offsets_for_times(topic, 0, base) == 37, name
        assert c.offsets_for_times(topic, 0, base + 37) == 37, name
        assert c.offsets_for_times(topic, 0, base + 38) == 38, name
        assert c.list_offsets(topic, 0, base) == 37, name
