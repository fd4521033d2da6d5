"""Transactions: a confluent-kafka transactional producer commits and aborts; read_committed consumers
(both clients) see only committed records, read_uncommitted ones see everything; control markers take
offsets (so they count in the high watermark) and the last stable offset stops at an open transaction."""

from __future__ import annotations

import pytest
from clients import past_ts, unique, wait_for_value

pytestmark = pytest.mark.integration


def transactional_producer(bootstrap: str):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("txn"), "linger.ms": 5,
                  "transaction.timeout.ms": 60000})
    p.init_transactions(30)
    return p


def lso(client, topic: str) -> int:
    return client.list_offsets(topic, 0, "latest", isolation_level="read_committed")


def send(p, topic: str, values: list[bytes], ts: int) -> None:
    for i, v in enumerate(values):
        p.produce(topic, key=b"k", value=v, partition=0, timestamp=ts + i)
    assert p.flush(30) == 0


def test_read_committed_vs_read_uncommitted(client, bootstrap):
    topic = unique("txn")
    client.create_topic(topic, 1)
    ts = past_ts()
    committed1 = [f"c1-{i}".encode() for i in range(10)]
    aborted = [f"ab-{i}".encode() for i in range(7)]
    committed2 = [f"c2-{i}".encode() for i in range(5)]
    p = transactional_producer(bootstrap)
    p.begin_transaction()
    send(p, topic, committed1, ts)  # offsets 0-9, commit marker 10
    p.commit_transaction(30)
    p.begin_transaction()
    send(p, topic, aborted, ts)  # offsets 11-17, abort marker 18
    p.abort_transaction(30)
    p.begin_transaction()
    send(p, topic, committed2, ts)  # offsets 19-23, commit marker 24
    p.commit_transaction(30)

    hw = 10 + 1 + 7 + 1 + 5 + 1
    # EndTxn returns once the coordinator has prepared the commit: markers may land a moment later.
    wait_for_value(lambda: client.high_watermark(topic, 0), hw, 10, "high watermark")
    wait_for_value(lambda: lso(client, topic), hw, 10, "last stable offset")
    got = client.consume(topic, 0, 0, None, isolation_level="read_committed")
    assert [g.value for g in got] == committed1 + committed2
    assert [g.offset for g in got] == list(range(10)) + list(range(19, 24))
    got = client.consume(topic, 0, 0, None, isolation_level="read_uncommitted")
    assert [g.value for g in got] == committed1 + aborted + committed2
    assert [g.offset for g in got] == list(range(10)) + list(range(11, 18)) + list(range(19, 24))

    # An open transaction: the LSO stays at its first offset, read_committed readers stop there.
    p.begin_transaction()
    pending = [b"open-0", b"open-1", b"open-2"]
    send(p, topic, pending, ts)  # offsets 25-27
    assert client.high_watermark(topic, 0) == hw + 3
    assert lso(client, topic) == hw
    got = client.consume(topic, 0, 20, None, isolation_level="read_committed")
    assert [g.value for g in got] == committed2[1:]
    got = client.consume(topic, 0, hw, 3, isolation_level="read_uncommitted")
    assert [g.value for g in got] == pending
    p.commit_transaction(30)
    wait_for_value(lambda: client.high_watermark(topic, 0), hw + 4, 10, "high watermark after the last commit")
    wait_for_value(lambda: lso(client, topic), hw + 4, 10, "last stable offset after the last commit")
    got = client.consume(topic, 0, hw, None, isolation_level="read_committed")
    assert [g.value for g in got] == pending
