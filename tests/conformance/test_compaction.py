"""Log compaction (cleanup.policy=compact), as Apache Kafka's log cleaner does it.

The cleaner only cleans closed segments: within [start, base of the active segment) a record survives
only if it is the newest one for its key in that range; the active segment is untouched; offsets never
change and the log start offset does not move.  Segments roll by segment.ms of record time, and a
transaction marker goes once no record of its transaction is left and it is older than
delete.retention.ms.  Needs a broker started with a short log.cleaner.backoff.ms, so it only runs
against an embedded broker.  Records without a key are refused on a compacted topic, which is
checked on any broker."""

from __future__ import annotations

import time

import pytest

from . import kafka_wire as wire
from .clients import CLIENT_NAMES, ProduceError, Record, make_client, past_ts, unique, wait_for_value
from .test_transactions import transactional_producer

pytestmark = pytest.mark.integration

CORRUPT_MESSAGE, INVALID_RECORD = 2, 87


@pytest.fixture(scope="module")
def cleaner_broker(broker_factory):
    return broker_factory.start_configured("cleaner", {"log.cleaner.backoff.ms": "100"})


def test_compacted_topic_refuses_records_without_key(client, bootstrap):
    topic = unique("compact-nokey")
    client.create_topic(topic, 1, configs={"cleanup.policy": "compact"})
    ts = past_ts()
    with pytest.raises(ProduceError):
        client.produce(topic, [Record(key=None, value=b"no key", timestamp_ms=ts, partition=0)])
    with wire.connect(bootstrap) as s:
        batch = wire.encode_batch([b"no key"], base_timestamp=ts)
        _, err, _ = wire.parse_produce_v3(wire.call(s, wire.produce_v3(topic, 0, batch, 1)))
    assert err in (CORRUPT_MESSAGE, INVALID_RECORD), f"error {err}"
    assert client.produce(topic, [Record(key=b"k", value=b"keyed", timestamp_ms=ts, partition=0)]) == [(0, 0)]
    assert client.watermarks(topic, 0) == (0, 1)


@pytest.mark.parametrize("client_name", CLIENT_NAMES)
def test_compaction_keeps_the_newest_record_per_key(cleaner_broker, client_name):
    """25 batches of ~100 KB with segment.bytes=1 MiB: segments [0-9] [10-19] and the active [20-24];
    keys k0..k4 round robin, so in the closed range [0, 20) only offsets 15-19 are the newest per key."""
    c = make_client(client_name, cleaner_broker.bootstrap)
    topic = unique("compact")
    try:
        c.create_topic(
            topic,
            1,
            configs={"cleanup.policy": "compact", "segment.bytes": "1048576", "min.cleanable.dirty.ratio": "0.01"},
        )
        ts = past_ts()
        records = [
            Record(key=b"k%d" % (i % 5), value=bytes([i]) * 100_000, timestamp_ms=ts + i, partition=0)
            for i in range(25)
        ]
        assert c.produce(topic, records, batch_records=1) == [(0, i) for i in range(25)]
        survivors = list(range(15, 25))

        def offsets():
            return [g.offset for g in c.consume(topic, 0, 0, None)]

        wait_for_value(offsets, survivors, 8, "offsets left after compaction")
        got = c.consume(topic, 0, 0, None)
        assert [(g.key, g.value) for g in got] == [(records[o].key, records[o].value) for o in survivors]
        assert c.watermarks(topic, 0) == (0, 25)
    finally:
        c.close()


def test_compaction_drops_the_markers_of_emptied_transactions(cleaner_broker):
    """A transactional producer rewrites keys k0-k2 in 5 rounds, then writes `end`, on a compacted topic with
    segment.ms=200 and delete.retention.ms=0: a round every 300 ms starts a segment (record time), so the end's
    segment is the active one. Round r takes offsets 4r..4r+2 and its commit marker 4r+3; the end 20 and 21. The
    cleaner keeps round 4 and drops the earlier rounds with their markers; read_committed readers of both clients
    get the newest record per key at the offsets it was written at."""
    topic = unique("compact-txn")
    c = make_client("confluent", cleaner_broker.bootstrap)
    try:
        c.create_topic(
            topic,
            1,
            configs={
                "cleanup.policy": "compact",
                "segment.ms": "200",
                "delete.retention.ms": "0",
                "min.cleanable.dirty.ratio": "0.01",
            },
        )
        p = transactional_producer(cleaner_broker.bootstrap)
        rounds = [[(k, b"round-%d" % r) for k in (b"k0", b"k1", b"k2")] for r in range(5)] + [[(b"end", b"end")]]
        for records in rounds:
            p.begin_transaction()
            for key, value in records:
                p.produce(topic, key=key, value=value, partition=0)
            p.commit_transaction(30)
            time.sleep(0.3)
        expected = [(16, b"k0", b"round-4"), (17, b"k1", b"round-4"), (18, b"k2", b"round-4"), (20, b"end", b"end")]

        def committed(client):
            got = client.consume(topic, 0, 0, None, isolation_level="read_committed")
            return [(g.offset, g.key, g.value) for g in got]

        wait_for_value(lambda: committed(c), expected, 15, "read_committed records after compaction")
        markers = [b["base_offset"] for b in wire.fetch_all_batches(cleaner_broker.bootstrap, topic, 0) if b["control"]]
        assert markers == [19, 21]  # round 4's, whose records stay, and the end's, in the active segment
        assert c.watermarks(topic, 0) == (0, 22)
        other = make_client("kafka-python", cleaner_broker.bootstrap)
        try:
            assert committed(other) == expected
        finally:
            other.close()
    finally:
        c.close()
