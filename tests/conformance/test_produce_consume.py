"""Produce / fetch conformance: batching, exact offsets and watermarks, byte-exact records,
compression codecs and the idempotent producer, each with both clients (and cross-checked)."""

from __future__ import annotations

import pytest

from . import kafka_wire as wire
from .clients import CREATE_TIME, Consumed, Record, past_ts, records_for, unique

pytestmark = pytest.mark.integration


def assert_same_records(consumed: list[Consumed], expected: list[Record], offsets: list[int], who: str) -> None:
    assert len(consumed) == len(expected), f"{who}: got {len(consumed)} records, expected {len(expected)}"
    assert [c.offset for c in consumed] == offsets, f"{who}: offsets differ"
    for c, r in zip(consumed, expected, strict=True):
        assert c.content() == (r.key, r.value, r.headers, r.timestamp_ms), (
            f"{who}: record at offset {c.offset} differs:\n got      {c.content()!r}\n expected "
            f"{(r.key, r.value, r.headers, r.timestamp_ms)!r}"
        )
        assert c.timestamp_type == CREATE_TIME, f"{who}: offset {c.offset}: {c.timestamp_type}"


CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def test_many_batches_exact_high_watermark_and_bytes(client, all_clients, bootstrap):
    """50 batches x 200 records: offsets 0..N-1, HW == N, every consumer reads back identical bytes,
    and the broker keeps the producer's batches as they were (Kafka stores v2 batches as produced)."""
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
        assert_same_records(got, records[mid : mid + 5], list(range(mid, mid + 5)), f"{client.name}->{name} mid")
        # Nothing past the end: reading "to the end" from the HW yields no record.
        assert consumer.consume(topic, 0, len(records), None) == [], name
    batches_read = wire.fetch_all_batches(bootstrap, topic, 0)
    stored = [(b["base_offset"], b["count"]) for b in batches_read]
    wire.assert_stored_as_flushed(stored, per_batch, len(records))
    assert all(b["crc_ok"] and b["codec"] == 0 and b["timestamp_type"] == 0 for b in batches_read)
    assert [b["first_timestamp"] for b in batches_read] == [records[base].timestamp_ms for base, _ in stored]


def test_partitions_have_independent_offsets(client, all_clients):
    topic = unique("parts")
    client.create_topic(topic, 3)
    base = past_ts()
    records = [
        Record(key=f"k{i}".encode(), value=f"v{i}".encode(), timestamp_ms=base + i, partition=i % 3) for i in range(300)
    ]
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
def test_compression_roundtrip(client, all_clients, bootstrap, codec):
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
    # With compression.type=producer the broker keeps the producer's codec (it does not recompress).
    batches = wire.fetch_all_batches(bootstrap, topic, 0)
    assert all(b["crc_ok"] for b in batches)
    wire.assert_stored_as_flushed([(b["base_offset"], b["count"]) for b in batches], 150, len(records))
    compressible = [b for b in batches if b["last_offset"] < 600]
    # librdkafka sends a batch uncompressed when compressing does not make it smaller, as for the one or two records
    # it sends early under load (CI, 2026-11-27): a batch is the producer's codec or none, and a full one the codec.
    assert {b["codec"] for b in compressible} <= {CODEC_IDS[codec], 0}, compressible
    assert {b["codec"] for b in compressible if b["count"] >= 10} == {CODEC_IDS[codec]}, compressible


def test_idempotent_producer_in_order_without_duplicates(client, all_clients):
    topic = unique("idem")
    client.create_topic(topic, 2)
    base = past_ts()
    records = [Record(key=None, value=f"{i:06d}".encode(), timestamp_ms=base + i, partition=i % 2) for i in range(4000)]
    results = client.produce(topic, records, idempotent=True, batch_records=250)
    assert results == [(i % 2, i // 2) for i in range(4000)]
    # A second idempotent producer session (new producer id) appends after the first.
    more = [Record(key=b"k", value=f"more-{i}".encode(), timestamp_ms=base + 5000 + i, partition=0) for i in range(10)]
    assert client.produce(topic, more, idempotent=True) == [(0, 2000 + i) for i in range(10)]
    for name, consumer in all_clients.items():
        got = consumer.consume(topic, 0, 0, None)
        assert [c.value for c in got] == [r.value for r in records[0::2] + more], name
        assert [c.offset for c in got] == list(range(2010)), name
        got = consumer.consume(topic, 1, 0, None)
        assert [c.value for c in got] == [r.value for r in records[1::2]], name
        assert consumer.watermarks(topic, 1) == (0, 2000), name


def test_idempotent_duplicates_and_sequence_gaps_on_the_wire(bootstrap):
    """The broker-side half of idempotence, which clients cannot show: a retried batch (same producer id,
    epoch and sequence) is acknowledged with its original offset and not appended again; a sequence gap
    is refused with OUT_OF_ORDER_SEQUENCE_NUMBER (45)."""
    from .clients import make_client

    c = make_client("confluent", bootstrap)
    topic = unique("idem-wire")
    try:
        c.create_topic(topic, 1)
        ts = past_ts()
        with wire.connect(bootstrap) as s:
            corr, err, pid, epoch = wire.parse_init_producer_id_v0(wire.call(s, wire.init_producer_id_v0(1)))
            assert (corr, err) == (1, 0) and pid >= 0 and epoch >= 0

            def send(values, seq, cid):
                batch = wire.encode_batch(
                    values, base_timestamp=ts, producer_id=pid, producer_epoch=epoch, base_sequence=seq
                )
                got_cid, err, base = wire.parse_produce_v3(wire.call(s, wire.produce_v3(topic, 0, batch, cid)))
                assert got_cid == cid
                return err, base

            first = [b"a0", b"a1", b"a2"]
            assert send(first, 0, 2) == (0, 0)
            assert send(first, 0, 3) == (0, 0), "a retried batch must be acked with its first offset"
            assert send([b"b0", b"b1"], 3, 4) == (0, 3)
            assert send([b"b0", b"b1"], 3, 5) == (0, 3)
            err, _ = send([b"gap"], 10, 6)
            assert err == 45, f"sequence gap: error {err}, expected OUT_OF_ORDER_SEQUENCE_NUMBER (45)"
            assert send([b"c0"], 5, 7) == (0, 5)
        assert c.watermarks(topic, 0) == (0, 6)
        assert [g.value for g in c.consume(topic, 0, 0, None)] == [b"a0", b"a1", b"a2", b"b0", b"b1", b"c0"]
        batches = wire.fetch_all_batches(bootstrap, topic, 0)
        assert [(b["base_offset"], b["producer_id"], b["base_sequence"]) for b in batches] == [
            (0, pid, 0),
            (3, pid, 3),
            (5, pid, 5),
        ]
    finally:
        c.close()
