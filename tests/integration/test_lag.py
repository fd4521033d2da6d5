"""Lag, heartbeats and `kafka-dr lag` against real embedded brokers (two single-broker clusters).

The replication job is simulated by hand: its progress is a commit of group <flow> on the source, and its
copies of heartbeats are records with a `__kdr_prov` hop in the target.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from support.kafka import Record, commit_offsets, create_topic, produce
from support.ports import free_port
from support.stack import BrokerPair

from kafka_dr import cli
from kafka_dr.access import ClusterAccess
from kafka_dr.replication import lag as lag_module
from kafka_dr.replication.heartbeat import parse_heartbeat, send_heartbeat, wait_for_heartbeat
from kafka_dr.replication.internal import HEARTBEATS
from kafka_dr.replication.lag import LagError, flow_lag
from kafka_dr.replication.provenance import HEADER, Hop
from kafka_dr.topology import Topology, parse_topology

pytestmark = pytest.mark.integration
NOW_MS = int(time.time() * 1000)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def topology(pair: BrokerPair, flows: str, dc1: str | None = None) -> Topology:
    text = pair.topology_yaml(flows)
    if dc1 is not None:
        text = text.replace(pair.dc1.bootstrap, dc1)
    return parse_topology(yaml.safe_load(text))


def stamped(partition: int, timestamps: list[int]) -> list[Record]:
    """Records of `partition` with the given CreateTimes."""
    return [Record(b"v", str(i).encode(), partition, ts) for i, ts in enumerate(timestamps)]


@pytest.fixture(scope="module")
def txn_topic(broker_pair: BrokerPair) -> str:
    """Partition 0: offsets 0-4 data, 5-7 committed transaction, 8 its marker, 9-12 aborted, 13 its marker,
    14-15 data (end 16). Partition 1: an aborted transaction only (offsets 0-1, marker 2)."""
    config = broker_pair.dc1.config
    topic = unique("lag-txn")
    create_topic(config, topic, 2)
    produce(config, topic, stamped(0, [NOW_MS - 60_000 + i for i in range(5)]))
    produce(config, topic, stamped(0, [NOW_MS - 50_000] * 3), transactional_id=unique("tx"))
    produce(config, topic, stamped(0, [NOW_MS - 40_000] * 4), transactional_id=unique("tx"), commit=False)
    produce(config, topic, stamped(0, [NOW_MS - 30_000, NOW_MS - 20_000]))
    produce(config, topic, stamped(1, [NOW_MS - 10_000] * 2), transactional_id=unique("tx"), commit=False)
    return topic


def flow_yaml(name: str, include: str, rename: str = "{}") -> str:
    """A `flows:` section with one flow dc1 -> dc2."""
    return (
        f'flows:\n  - {{name: {name}, source: dc1, target: dc2, topics: {{include: ["{include}"]}}, '
        f"rename: {rename}}}\n"
    )


@pytest.mark.parametrize(
    ("committed", "records", "oldest_ms"),
    [
        (None, 10, NOW_MS - 60_000),  # no commit yet: everything from the log start is uncopied
        (5, 5, NOW_MS - 50_000),  # committed transaction, then (skipping the aborted one) two records
        (9, 2, NOW_MS - 30_000),  # only the aborted transaction and two records remain: it does not count
        (14, 2, NOW_MS - 30_000),
        (16, 0, None),
    ],
    ids=["no-commit", "at-committed-txn", "at-aborted-txn", "after-aborted-txn", "at-end"],
)
def test_lag_counts_data_records_only(
    broker_pair: BrokerPair, txn_topic: str, committed: int | None, records: int, oldest_ms: int | None
) -> None:
    name = unique("flow")
    if committed is not None:
        commit_offsets(broker_pair.dc1.config, name, {(txn_topic, 0): committed})
    lag = flow_lag(
        ClusterAccess.from_environ(
            topology(broker_pair, flow_yaml(name, txn_topic, f'{{"{txn_topic}": "{{topic}}.replica"}}'))
        ),
        name,
    )
    p0, p1 = lag.partitions
    assert (p0.topic, p0.partition, p0.dest_topic) == (txn_topic, 0, f"{txn_topic}.replica")
    assert (p0.next_offset, p0.end_offset, p0.lag_records, p0.estimated) == (committed or 0, 16, records, False)
    expected_seconds = 0.0 if oldest_ms is None else (lag.measured_at_ms - oldest_ms) / 1000
    assert p0.lag_seconds == pytest.approx(expected_seconds, abs=0.002)
    # Partition 1 holds nothing but an aborted transaction and its marker.
    assert (p1.next_offset, p1.end_offset, p1.lag_records, p1.lag_seconds) == (0, 3, 0, 0.0)
    assert lag.total_records == records


def test_large_lag_is_estimated_from_offsets(
    broker_pair: BrokerPair, txn_topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lag_module, "COUNT_LIMIT", 5)
    name = unique("flow")
    lag = flow_lag(ClusterAccess.from_environ(topology(broker_pair, flow_yaml(name, txn_topic))), name)
    p0 = lag.partitions[0]
    assert (p0.lag_records, p0.estimated) == (16, True)  # 16 offsets, markers and aborted records included
    assert p0.lag_seconds == pytest.approx((lag.measured_at_ms - (NOW_MS - 60_000)) / 1000, abs=0.002)


def test_records_deleted_before_copy_count_as_uncopied(broker_pair: BrokerPair) -> None:
    config, name, topic = broker_pair.dc1.config, unique("flow"), unique("lag-deleted")
    admin = AdminClient(config)
    create_topic(config, topic, 1)
    produce(config, topic, stamped(0, [NOW_MS - 5_000 + i for i in range(6)]))
    commit_offsets(config, name, {(topic, 0): 1})
    admin.delete_records([TopicPartition(topic, 0, 4)])[TopicPartition(topic, 0, 4)].result(10)
    (p0,) = flow_lag(ClusterAccess.from_environ(topology(broker_pair, flow_yaml(name, topic))), name).partitions
    assert (p0.next_offset, p0.lag_records, p0.estimated) == (1, 5, True)  # 3 lost + 2 still readable


def test_topics_regex_and_internal_topics(broker_pair: BrokerPair, txn_topic: str) -> None:
    name = unique("flow")
    send_heartbeat(broker_pair.dc1.config, name)  # `_kdr.heartbeats` exists in the source
    topo = topology(broker_pair, flow_yaml(name, ".*"))
    lag = flow_lag(ClusterAccess.from_environ(topo), name, topics=f"{txn_topic}|nothing")
    assert {p.topic for p in lag.partitions} == {txn_topic}
    assert not any(p.topic.startswith("_kdr.") for p in flow_lag(ClusterAccess.from_environ(topo), name).partitions)


def test_unreachable_cluster_is_named(broker_pair: BrokerPair) -> None:
    dead = f"127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(LagError, match=rf"^flow f: source cluster dc1 \({dead}\): describe cluster failed: .+$"):
        flow_lag(ClusterAccess.from_environ(topology(broker_pair, flow_yaml("f", "x"), dc1=dead)), "f", timeout=1)
    reversed_flow = "flows:\n  - {name: back, source: dc2, target: dc1, topics: {include: [x]}}\n"
    with pytest.raises(LagError, match=rf"^flow back: target cluster dc1 \({dead}\): "):
        flow_lag(ClusterAccess.from_environ(topology(broker_pair, reversed_flow, dc1=dead)), "back", timeout=1)


def copy_heartbeat(
    target: dict,
    value: bytes,
    created_ms: int,
    source_id: str,
    copied_ms: int,
    offset: int = 0,
    extra_hops: tuple[Hop, ...] = (),
) -> None:
    """What the replication job writes into the target's heartbeat topic."""
    hop = Hop(source_id, HEARTBEATS, 0, offset, copied_ms)
    producer = Producer(target)
    producer.produce(
        HEARTBEATS,
        key=b"x",
        value=value,
        timestamp=created_ms,
        headers=[(HEADER, h.encode()) for h in (*extra_hops, hop)],
    )
    assert producer.flush(10) == 0


def test_heartbeat_latency_from_the_newest_copy(broker_pair: BrokerPair) -> None:
    # Flow dc2 -> dc1. The worker's stack may hold older heartbeats that other tests' flows copied from dc2 into dc1:
    # the newest copy is what counts (before any copy the latency is None: tests/unit/replication/test_lag.py).
    name, dc1, dc2 = unique("flow"), broker_pair.dc1, broker_pair.dc2
    topo = parse_topology(
        {
            "clusters": {"dc1": {"bootstrap_servers": dc1.bootstrap}, "dc2": {"bootstrap_servers": dc2.bootstrap}},
            "flows": [{"name": name, "source": "dc2", "target": "dc1", "topics": {"include": ["x"]}}],
        }
    )
    created = int(time.time() * 1000)
    copy_heartbeat(dc1.config, b"{}", created, dc2.cluster_id, created + 250)
    copy_heartbeat(dc1.config, b"{}", created + 1000, dc2.cluster_id, created + 1500)  # newest copy: 0.5 s
    copy_heartbeat(dc1.config, b"{}", created, "another-cluster", created + 9000)  # not copied from dc2
    assert flow_lag(ClusterAccess.from_environ(topo), name).heartbeat_latency_s == pytest.approx(0.5)
    # A copy of a copy is charged from its arrival in dc2 (the previous hop), not from its creation.
    copy_heartbeat(
        dc1.config,
        b"{}",
        created + 1000,
        dc2.cluster_id,
        created + 2000,
        extra_hops=(Hop("origin", HEARTBEATS, 0, 0, created + 1900),),
    )
    assert flow_lag(ClusterAccess.from_environ(topo), name).heartbeat_latency_s == pytest.approx(0.1)


def test_heartbeat_round_trip(broker_pair: BrokerPair) -> None:
    dc1, dc2, name = broker_pair.dc1, broker_pair.dc2, unique("flow")
    heartbeat = send_heartbeat(dc1.config, name)
    reader = Consumer({**dc1.config, "group.id": unique("g"), "auto.offset.reset": "earliest"})
    reader.assign([TopicPartition(HEARTBEATS, 0, 0)])
    deadline, found = time.time() + 10, None
    while found is None and time.time() < deadline:
        for msg in reader.consume(100, timeout=0.2):
            if msg.error() is None and msg.key() == name.encode():
                found = msg
    reader.close()
    assert found is not None and parse_heartbeat(found.value()) == heartbeat
    assert found.timestamp()[1] == heartbeat.created_ms

    def replicate_later() -> None:
        time.sleep(0.5)
        copy_heartbeat(
            dc2.config,
            found.value(),
            heartbeat.created_ms,
            dc1.cluster_id,
            heartbeat.created_ms + 700,
            offset=found.offset(),
        )

    copier = threading.Thread(target=replicate_later)
    copier.start()
    try:
        assert wait_for_heartbeat(dc2.config, heartbeat, timeout=10) == pytest.approx(0.7)
    finally:
        copier.join()
    # Already copied before waiting starts: found in the window read back from the end.
    assert wait_for_heartbeat(dc2.config, heartbeat, timeout=5) == pytest.approx(0.7)


def test_heartbeat_not_copied_times_out(broker_pair: BrokerPair) -> None:
    heartbeat = send_heartbeat(broker_pair.dc1.config, unique("flow"))
    with pytest.raises(
        TimeoutError,
        match=rf"heartbeat {heartbeat.id} of flow .* did not reach _kdr.heartbeats "
        rf"on cluster {broker_pair.dc2.bootstrap} within 1 s",
    ):
        wait_for_heartbeat(broker_pair.dc2.config, heartbeat, timeout=1)


def test_cli_lag_json_table_and_unreachable_flow(
    broker_pair: BrokerPair,
    txn_topic: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = unique("flow")
    commit_offsets(broker_pair.dc1.config, name, {(txn_topic, 0): 9})
    dead = f"127.0.0.1:{free_port()}"  # nothing listens there
    path = tmp_path / "topology.yaml"
    path.write_text(
        broker_pair.topology_yaml(
            flow_yaml(name, txn_topic) + "  - {name: down, source: dc3, target: dc2, topics: {include: [x]}}\n"
        ).replace("clusters:\n", f'clusters:\n  dc3: {{bootstrap_servers: "{dead}"}}\n')
    )

    assert cli.main(["lag", "--topology", str(path), "--flow", name, "--json"]) == 0
    out, err = capsys.readouterr()
    (data,) = json.loads(out)
    assert (data["flow"], data["total_records"]) == (name, 2)
    assert [(p["partition"], p["next_offset"], p["lag_records"]) for p in data["partitions"]] == [(0, 9, 2), (1, 0, 0)]

    assert cli.main(["lag", "--topology", str(path), "--timeout", "1"]) == 1  # every flow; one cannot be reached
    out, err = capsys.readouterr()
    rows = [line.split() for line in out.splitlines()]
    assert rows[1][:7] == [name, txn_topic, "0", txn_topic, "9", "16", "2"]
    assert f"flow {name} (dc1 -> dc2): 2 partitions, 2 records behind" in out
    assert err.count("\n") == 1 and err.startswith(f"kafka-dr: error: flow down: source cluster dc3 ({dead}): ")

    monkeypatch.setenv("KDR_TOPOLOGY", str(path))  # the default topology
    assert cli.main(["lag", "--flow", "nope"]) == 2
    assert capsys.readouterr().err.startswith("kafka-dr: error: unknown flow 'nope'")
