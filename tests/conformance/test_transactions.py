"""Transactions: a confluent-kafka transactional producer commits and aborts; read_committed consumers
(both clients) see only committed records, read_uncommitted ones see everything; control markers take
offsets (so they count in the high watermark) and the last stable offset stops at an open transaction."""

from __future__ import annotations

import pytest

from . import kafka_wire as wire
from .clients import past_ts, unique, wait_for_value

pytestmark = pytest.mark.integration


def transactional_producer(bootstrap: str):
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": unique("txn"),
            "linger.ms": 5,
            "transaction.timeout.ms": 60000,
        }
    )
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
    # On the wire: transactional data batches, one control batch per marker, and a read_committed fetch
    # lists the aborted transaction so consumers can drop its records.
    batches = wire.fetch_all_batches(bootstrap, topic, 0)
    assert [(b["base_offset"], b["control"]) for b in batches if b["control"]] == [(10, True), (18, True), (24, True)]
    assert all(b["transactional"] for b in batches)
    [pid] = {b["producer_id"] for b in batches}
    with wire.connect(bootstrap) as sock:
        resp = wire.parse_fetch_v4(wire.call(sock, wire.fetch_v4(topic, 0, 0, 77, isolation_level=1)))
    assert (resp["error_code"], resp["high_watermark"], resp["last_stable_offset"]) == (0, hw, hw)
    assert resp["aborted"] == [(pid, 11)], resp["aborted"]

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


def test_new_producer_instance_fences_the_old_one(client, bootstrap):
    """init_transactions() by a second producer with the same transactional.id aborts the first one's
    open transaction and fences it: its commit fails and read_committed readers never see its records."""
    from confluent_kafka import KafkaException, Producer

    topic, txn_id = unique("fence"), unique("txn")
    client.create_topic(topic, 1)
    ts = past_ts()
    conf = {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5}
    old = Producer(conf)
    old.init_transactions(30)
    old.begin_transaction()
    send(old, topic, [b"zombie-0", b"zombie-1"], ts)
    new = Producer(conf)
    new.init_transactions(30)
    with pytest.raises(KafkaException) as info:
        old.commit_transaction(30)
    assert info.value.args[0].fatal() or "fenc" in str(info.value).lower(), info.value
    new.begin_transaction()
    send(new, topic, [b"fresh-0"], ts)
    new.commit_transaction(30)
    got = client.consume(topic, 0, 0, None, isolation_level="read_committed")
    assert [g.value for g in got] == [b"fresh-0"]
    got = client.consume(topic, 0, 0, None, isolation_level="read_uncommitted")
    assert [g.value for g in got] == [b"zombie-0", b"zombie-1", b"fresh-0"]


def test_offsets_sent_to_a_transaction_commit_with_it(client, bootstrap):
    """send_offsets_to_transaction: group offsets become visible only if the transaction commits."""
    from confluent_kafka import Consumer

    topic, group = unique("txn-offsets"), unique("group")
    client.create_topic(topic, 1)
    ts = past_ts()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        p = transactional_producer(bootstrap)
        from confluent_kafka import TopicPartition

        p.begin_transaction()
        send(p, topic, [b"a"], ts)
        p.send_offsets_to_transaction([TopicPartition(topic, 0, 11)], consumer.consumer_group_metadata(), 30)
        p.abort_transaction(30)
        assert client.committed(group, [(topic, 0)]) == {(topic, 0): None}
        p.begin_transaction()
        send(p, topic, [b"b"], ts)
        p.send_offsets_to_transaction([TopicPartition(topic, 0, 22)], consumer.consumer_group_metadata(), 30)
        p.commit_transaction(30)
        wait_for_value(
            lambda: client.committed(group, [(topic, 0)]), {(topic, 0): 22}, 10, "offsets committed by the transaction"
        )
        got = client.consume(topic, 0, 0, None, isolation_level="read_committed")
        assert [g.value for g in got] == [b"b"]
    finally:
        consumer.close()


def test_open_transaction_holds_back_later_records(client, bootstrap):
    """The last stable offset stops at the first offset of the oldest open transaction: read_committed
    readers do not see later records, even non-transactional ones, until it completes."""
    from confluent_kafka import Producer

    topic = unique("lso-block")
    client.create_topic(topic, 1)
    ts = past_ts()
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    send(plain, topic, [b"before"], ts)  # offset 0
    p = transactional_producer(bootstrap)
    p.begin_transaction()
    send(p, topic, [b"txn-0", b"txn-1"], ts)  # offsets 1-2
    send(plain, topic, [b"plain-after"], ts)  # offset 3
    assert client.high_watermark(topic, 0) == 4
    assert lso(client, topic) == 1
    got = client.consume(topic, 0, 0, None, isolation_level="read_committed")
    assert [g.value for g in got] == [b"before"]
    p.commit_transaction(30)
    wait_for_value(lambda: lso(client, topic), 5, 10, "last stable offset after the commit")
    got = client.consume(topic, 0, 0, None, isolation_level="read_committed")
    assert [g.value for g in got] == [b"before", b"txn-0", b"txn-1", b"plain-after"]
