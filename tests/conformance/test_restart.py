"""Durability across a broker restart (SIGTERM, then a new process on the same data dir)."""

from __future__ import annotations

import pytest

from . import kafka_wire as wire
from .clients import CLIENT_NAMES, Record, make_client, past_ts, records_for, unique, wait_for_value

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("client_name", CLIENT_NAMES)
def test_data_and_committed_offsets_survive_restart(restartable_broker, client_name):
    broker = restartable_broker
    c = make_client(client_name, broker.bootstrap)
    topic, group = unique("durable"), unique("group")
    try:
        cluster_id = c.cluster_id()
        c.create_topic(topic, 2, configs={"retention.ms": "86400000"})
        records = records_for(c, 500, base_ts=past_ts(), seed=4, partition=1)
        c.produce(topic, records, batch_records=100)
        c.commit(group, {(topic, 0): 0, (topic, 1): 321}, metadata="before-restart")
    finally:
        c.close()

    broker.restart()

    c = make_client(client_name, broker.bootstrap)
    try:
        assert c.cluster_id() == cluster_id == broker.cluster_id_on_disk()
        assert c.partition_count(topic) == 2
        assert c.committed(group, [(topic, 0), (topic, 1)]) == {(topic, 0): 0, (topic, 1): 321}
        assert c.watermarks(topic, 1) == (0, 500)
        assert c.watermarks(topic, 0) == (0, 0)
        got = c.consume(topic, 1, 0, 500)
        assert [g.content() for g in got] == [(r.key, r.value, r.headers, r.timestamp_ms) for r in records]
        assert c.describe_configs(topic)["retention.ms"].value == "86400000"
        # The log goes on where it stopped.
        more = records_for(c, 10, base_ts=past_ts(), seed=5, partition=1)
        assert c.produce(topic, more) == [(1, 500 + i) for i in range(10)]
        c.commit(group, {(topic, 1): 510})
        assert c.committed(group, [(topic, 1)]) == {(topic, 1): 510}
    finally:
        c.close()


@pytest.mark.parametrize("client_name", CLIENT_NAMES)
def test_acknowledged_data_survives_a_crash(restartable_broker, client_name):
    """SIGKILL (a process crash, the OS page cache survives): every acknowledged record and committed
    offset is still there after the restart, and the idempotent producer state was rebuilt (a retried
    batch from before the crash is still recognised as a duplicate)."""
    broker = restartable_broker
    c = make_client(client_name, broker.bootstrap)
    topic, group = unique("crash"), unique("group")
    ts = past_ts()
    try:
        c.create_topic(topic, 1)
        records = records_for(c, 1000, base_ts=ts, seed=6, partition=0)
        c.produce(topic, records, batch_records=250)
        c.commit(group, {(topic, 0): 777})
        with wire.connect(broker.bootstrap) as s:
            _, err, pid, epoch = wire.parse_init_producer_id_v0(wire.call(s, wire.init_producer_id_v0(1)))
            assert err == 0
            batch = wire.encode_batch(
                [b"idem-0", b"idem-1"], base_timestamp=ts, producer_id=pid, producer_epoch=epoch, base_sequence=0
            )
            assert wire.parse_produce_v3(wire.call(s, wire.produce_v3(topic, 0, batch, 2)))[1:] == (0, 1000)
    finally:
        c.close()

    broker.kill()
    broker.start()

    c = make_client(client_name, broker.bootstrap)
    try:
        assert c.watermarks(topic, 0) == (0, 1002)
        got = c.consume(topic, 0, 0, 1000)
        assert [g.content() for g in got] == [(r.key, r.value, r.headers, r.timestamp_ms) for r in records]
        assert c.committed(group, [(topic, 0)]) == {(topic, 0): 777}
        with wire.connect(broker.bootstrap) as s:
            resp = wire.parse_produce_v3(wire.call(s, wire.produce_v3(topic, 0, batch, 3)))
        assert resp[1:] == (0, 1000), f"retried batch after restart: {resp}"
        assert c.watermarks(topic, 0) == (0, 1002), "the retried batch was appended twice"
    finally:
        c.close()


@pytest.mark.parametrize("client_name", CLIENT_NAMES)
def test_log_and_group_state_survives_restart(restartable_broker, client_name):
    """Everything a restart must keep besides the records: the log start offset moved by DeleteRecords,
    aborted transactions (read_committed still filters them), added partitions, altered configs, and
    deleted topics and groups stay deleted."""
    broker = restartable_broker
    c = make_client(client_name, broker.bootstrap)
    trimmed, txn, grown, gone = (unique(p) for p in ("trimmed", "txn", "grown", "gone"))
    kept_group, gone_group = unique("group"), unique("group")
    ts = past_ts()
    try:
        c.create_topic(trimmed, 1)
        c.produce(
            trimmed,
            [Record(key=None, value=b"v%d" % i, timestamp_ms=ts + i, partition=0) for i in range(100)],
            batch_records=10,
        )
        assert c.delete_records(trimmed, 0, 37) == 37
        c.alter_config(trimmed, "retention.ms", "7200000")

        c.create_topic(txn, 1)
        write_transactions(broker.bootstrap, txn, ts)
        wait_for_value(lambda: c.high_watermark(txn, 0), 9, 10, "HW with the three markers")

        c.create_topic(grown, 1)
        c.create_partitions(grown, 3)
        c.create_topic(gone, 1)
        c.delete_topic(gone)
        c.commit(kept_group, {(grown, 2): 5})
        c.commit(gone_group, {(grown, 0): 1})
        c.delete_group(gone_group)
    finally:
        c.close()

    broker.restart()

    c = make_client(client_name, broker.bootstrap)
    try:
        assert c.watermarks(trimmed, 0) == (37, 100)
        assert [g.offset for g in c.consume(trimmed, 0, 0, 1, reset="earliest")] == [37]
        assert c.describe_configs(trimmed)["retention.ms"].value == "7200000"
        got = c.consume(txn, 0, 0, None, isolation_level="read_committed")
        assert [g.value for g in got] == [b"c0", b"c1", b"c2"]
        got = c.consume(txn, 0, 0, None, isolation_level="read_uncommitted")
        assert [g.value for g in got] == [b"c0", b"c1", b"a0", b"a1", b"a2", b"c2"]
        assert c.list_offsets(txn, 0, "latest", isolation_level="read_committed") == 9
        assert c.partition_count(grown) == 3
        assert c.partition_count(gone) == -1
        assert c.committed(kept_group, [(grown, 2)]) == {(grown, 2): 5}
        assert gone_group not in c.list_groups()
        assert c.committed(gone_group, [(grown, 0)]) == {(grown, 0): None}
    finally:
        c.close()


def write_transactions(bootstrap: str, topic: str, ts: int) -> None:
    """c0 c1 committed, a0 a1 a2 aborted, c2 committed: 6 records and 3 markers in partition 0."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("txn"), "linger.ms": 5})
    p.init_transactions(30)
    for values, commit in (([b"c0", b"c1"], True), ([b"a0", b"a1", b"a2"], False), ([b"c2"], True)):
        p.begin_transaction()
        for v in values:
            p.produce(topic, value=v, partition=0, timestamp=ts)
        assert p.flush(30) == 0
        p.commit_transaction(30) if commit else p.abort_transaction(30)
