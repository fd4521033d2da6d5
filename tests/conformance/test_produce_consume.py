"""Produce / fetch conformance: batching, exact offsets and watermarks, byte-exact records,
compression codecs and the idempotent producer, each with both clients (and cross-checked)."""

from __future__ import annotations

import pytest
from clients import CREATE_TIME, Consumed, Record, past_ts, records_for, unique

pytestmark = pytest.mark.integration


def assert_same_records(consumed: list[Consumed], expected: list[Record], offsets: list[int], who: str) -> None:
    assert len(consumed) == len(expected), f"{who}: got {len(consumed)} records, expected {len(expected)}"
    assert [c.offset for c in consumed] == offsets, f"{who}: offsets differ"
    for c, r in zip(consumed, expected, strict=True):
        assert c.content() == (r.key, r.value, r.headers, r.timestamp_ms), \
            f"{who}: record at offset {c.offset} differs:\n got      {c.content()!r}\n expected " \
            f"{(r.key, r.value, r.headers, r.timestamp_ms)!r}"
        assert c.timestamp_type == CREATE_TIME, f"{who}: offset {c.offset}: {c.timestamp_type}"


def test_many_batches_exact_high_watermark_and_bytes(client, all_clients):
    """50 batches x 200 records: offsets 0..N-1, HW == N, every consumer reads back identical bytes."""
    topic = unique("batches")
    client.create_topic(topic, 1)
    batches, per_batch = 50, 200
    records = records_for(client, batches * per_batch, base_ts=past_ts(), seed=1, partition=0)
    results = client.produce(topic, records, batch_records=per_batch)
    assert results == [(0, i) for i in range(len(records))]

    assert client.watermarks(topic, 0) == (0, len(records))
    for name, consumer in all_clients.items():
        assert consumer.watermarks(topic, 0) == (0, len(records)), name
        got = consumer.consume(topic, 0, 0, len(records))
        assert_same_records(got, records, list(range(len(records))), f"{client.name}->{name}")
        # Start in the middle of a batch: the records before the fetch offset must not show up.
        mid = 4321
        got = consumer.consume(topic, 0, mid, 5)
        assert_same_records(got, records[mid:mid + 5], list(range(mid, mid + 5)), f"{client.name}->{name} mid")
        # Nothing past the end: reading "to the end" from the HW yields no record.
        assert consumer.consume(topic, 0, len(records), None) == [], name


def test_partitions_have_independent_offsets(client, all_clients):
    topic = unique("parts")
    client.create_topic(topic, 3)
    base = past_ts()
    records = [Record(key=f"k{i}".encode(), value=f"v{i}".encode(), timestamp_ms=base + i, partition=i % 3)
               for i in range(300)]
    results = client.produce(topic, records, batch_records=60)
    assert results == [(i % 3, i // 3) for i in range(300)]
    for name, consumer in all_clients.items():
        for p in range(3):
            assert consumer.watermarks(topic, p) == (0, 100), (name, p)
            expected = records[p::3]
            got = consumer.consume(topic, p, 0, None)
            assert_same_records(got, expected, list(range(100)), f"{client.name}->{name} p{p}")
            assert all(c.partition == p for c in got)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression_roundtrip(client, all_clients, codec):
    """Compressed batches come back byte-for-byte, whichever client produced and whichever reads."""
    topic = unique(f"comp-{codec}")
    client.create_topic(topic, 1)
    records = records_for(client, 600, base_ts=past_ts(), seed=8, partition=0, compressible=True)
    # Add a few incompressible, larger values too.
    records += records_for(client, 60, base_ts=past_ts() + 1000, seed=9, partition=0, value_size=4000)
    results = client.produce(topic, records, compression=codec, batch_records=150)
    assert results == [(0, i) for i in range(len(records))]
    for name, consumer in all_clients.items():
        assert consumer.high_watermark(topic, 0) == len(records), name
        got = consumer.consume(topic, 0, 0, len(records))
        assert_same_records(got, records, list(range(len(records))), f"{codec}: {client.name}->{name}")
        got = consumer.consume(topic, 0, 333, 3)
        assert [c.offset for c in got] == [333, 334, 335], f"{codec}: {client.name}->{name}"


def test_idempotent_producer_in_order_without_duplicates(client, all_clients):
    topic = unique("idem")
    client.create_topic(topic, 2)
    base = past_ts()
    records = [Record(key=None, value=f"{i:06d}".encode(), timestamp_ms=base + i, partition=i % 2)
               for i in range(4000)]
    results = client.produce(topic, records, idempotent=True, batch_records=250)
    assert results == [(i % 2, i // 2) for i in range(4000)]
    # A second idempotent producer session (new producer id) appends after the first.
    more = [Record(key=b"k", value=f"more-{i}".encode(), timestamp_ms=base + 5000 + i, partition=0)
            for i in range(10)]
    assert client.produce(topic, more, idempotent=True) == [(0, 2000 + i) for i in range(10)]
    for name, consumer in all_clients.items():
        got = consumer.consume(topic, 0, 0, None)
        assert [c.value for c in got] == [r.value for r in records[0::2] + more], name
        assert [c.offset for c in got] == list(range(2010)), name
        got = consumer.consume(topic, 1, 0, None)
        assert [c.value for c in got] == [r.value for r in records[1::2]], name
        assert consumer.watermarks(topic, 1) == (0, 2000), name
