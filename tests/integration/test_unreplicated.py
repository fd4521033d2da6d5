"""What never left a restored cluster, measured on two embedded clusters: records past what the serving cluster
holds (its copies say where), records deleted before they were copied, copies that came from the serving cluster
(not counted), transaction markers (not counted); that measuring changes neither cluster; and republishing them,
once, with the flow then copying the republished records and never the originals."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from support.kafka import Record, create_topic, first_round, high_watermarks, produce, read_all
from support.stack import BrokerPair
from support.topology import write_topology

from kafka_dr.access import ClusterAccess
from kafka_dr.codec import encode
from kafka_dr.failback.republish import republish, skip_originals
from kafka_dr.failback.unreplicated import MeasureError, measure
from kafka_dr.replication.copier import copy_ranges
from kafka_dr.replication.provenance import hops
from kafka_dr.topology import Topology, load_topology
from kafka_dr.wire import REPUBLISHED_HEADER

pytestmark = pytest.mark.integration


def topology_of(pair: BrokerPair, tmp_path: Path, topic: str, both_ways: bool = False) -> Topology:
    flows = f"  - {{name: {topic}-there, source: dc1, target: dc2, topics: {{include: ['{topic}.*']}}}}"
    if both_ways:
        flows += f"\n  - {{name: {topic}-back, source: dc2, target: dc1, topics: {{include: ['{topic}.*']}}}}"
    clusters = {"dc1": pair.dc1.bootstrap, "dc2": pair.dc2.bootstrap}
    return load_topology(write_topology(tmp_path / f"{topic}.yaml", clusters, flows))


def copy(topology: Topology, flow: str, upto: int | None = None) -> None:
    """Copy the flow, each partition up to source offset `upto` (None: to its end)."""
    tasks = first_round(topology, flow).tasks
    cut = [t if upto is None or t.topic.startswith("_kdr.") else dataclasses.replace(t, end=upto) for t in tasks]
    copy_ranges(cut)


def keyed(count: int) -> list[Record]:
    """Records k<i>/v<i> in partition 0."""
    return [Record(f"v{i}".encode(), f"k{i}".encode()) for i in range(count)]


def test_records_past_the_last_copy_and_those_deleted_first_are_measured_exactly(
    broker_pair: BrokerPair, tmp_path: Path
) -> None:
    topic = f"lost-{uuid.uuid4().hex[:8]}"
    create_topic(broker_pair.dc1.config, topic)
    produce(broker_pair.dc1.config, topic, keyed(1000))
    topology = topology_of(broker_pair, tmp_path, topic)
    copy(topology, f"{topic}-there", upto=990)  # 990 of the 1,000 reached dc2
    admin = AdminClient(broker_pair.dc1.config)
    admin.delete_records([TopicPartition(topic, 0, 995)])[TopicPartition(topic, 0, 995)].result(10)
    create_topic(broker_pair.dc1.config, f"{topic}-new")  # made after the outage began: never synced to dc2
    produce(broker_pair.dc1.config, f"{topic}-new", keyed(3))
    before = (high_watermarks(broker_pair.dc1.config), high_watermarks(broker_pair.dc2.config))

    found = measure(ClusterAccess.from_environ(topology), "dc1", "dc2")

    assert (found.records, found.per_topic) == (8, {topic: 5, f"{topic}-new": 3})
    report = encode(found.measured())  # the report's `unreplicated` fields
    assert report["ranges"] == [
        {"flow": f"{topic}-there", "topic": topic, "partition": 0, "from_offset": 995, "to_offset": 999, "records": 5},
        {
            "flow": f"{topic}-there",
            "topic": f"{topic}-new",
            "partition": 0,
            "from_offset": 0,
            "to_offset": 2,
            "records": 3,
        },
    ]
    assert report["deleted_before_copied"] == [{"topic": topic, "partition": 0, "from_offset": 990, "to_offset": 994}]
    assert (high_watermarks(broker_pair.dc1.config), high_watermarks(broker_pair.dc2.config)) == before


def test_copies_from_the_serving_cluster_and_transaction_markers_are_not_counted(
    broker_pair: BrokerPair, tmp_path: Path
) -> None:
    topic = f"aa-{uuid.uuid4().hex[:8]}"
    for pair_side in (broker_pair.dc1, broker_pair.dc2):
        create_topic(pair_side.config, topic)
    topology = topology_of(broker_pair, tmp_path, topic, both_ways=True)
    produce(broker_pair.dc1.config, topic, keyed(10), transactional_id=f"{topic}-app")  # offsets 0-9, marker at 10
    copy(topology, f"{topic}-there")
    produce(broker_pair.dc2.config, topic, keyed(3))
    copy(topology, f"{topic}-back")  # dc1 11-13 (+ marker 14): dc2's records, which must not go back
    produce(broker_pair.dc1.config, topic, keyed(4), transactional_id=f"{topic}-app")  # 15-18, marker 19
    produce(broker_pair.dc1.config, topic, keyed(2))  # 20-21

    found = measure(ClusterAccess.from_environ(topology), "dc1", "dc2")

    assert [(r.from_offset, r.to_offset, r.records) for r in found.ranges] == [(15, 21, 6)]
    assert found.records == 6 and found.flows == (f"{topic}-there",)


def test_an_unreachable_cluster_is_one_line_naming_it(broker_pair: BrokerPair, tmp_path: Path) -> None:
    path = write_topology(
        tmp_path / "down.yaml",
        {"dc1": "127.0.0.1:1", "dc2": broker_pair.dc2.bootstrap},
        "  - {name: down-flow, source: dc1, target: dc2, topics: {include: ['t']}}",
    )
    with pytest.raises(MeasureError, match=r"^flow down-flow: source cluster dc1 \(127.0.0.1:1\) unreachable") as err:
        measure(ClusterAccess.from_environ(load_topology(path)), "dc1", "dc2")
    assert "\n" not in str(err.value)


def test_republished_records_are_read_once_more_at_the_end_and_the_flow_copies_them_not_the_originals(
    broker_pair: BrokerPair, tmp_path: Path
) -> None:
    topic = f"repub-{uuid.uuid4().hex[:8]}"
    create_topic(broker_pair.dc1.config, topic)
    produce(broker_pair.dc1.config, topic, keyed(100))
    topology = topology_of(broker_pair, tmp_path, topic)
    copy(topology, f"{topic}-there", upto=97)  # 97-99 never left dc1
    found = measure(ClusterAccess.from_environ(topology), "dc1", "dc2")
    assert [(r.from_offset, r.to_offset) for r in found.ranges] == [(97, 99)]

    assert republish(ClusterAccess.from_environ(topology), found) == 3
    assert republish(ClusterAccess.from_environ(topology), found) == 0  # a retried run republishes nothing twice
    dc1_records = read_all(broker_pair.dc1.config, topic)
    dc1_id = broker_pair.dc1.cluster_id
    again = dc1_records[100:]
    assert [(m.offset(), m.key(), m.value()) for m in again] == [
        (100 + i, f"k{97 + i}".encode(), f"v{97 + i}".encode()) for i in range(3)
    ]
    assert [dict(m.headers())[REPUBLISHED_HEADER] for m in again] == [
        f"{dc1_id},{topic},0,{o}".encode() for o in (97, 98, 99)
    ]
    assert [m.timestamp()[1] for m in again] == [m.timestamp()[1] for m in dc1_records[97:100]]

    assert skip_originals(ClusterAccess.from_environ(topology), found) == {f"{topic}-there {topic}[0]": 100}
    copy(topology, f"{topic}-there")  # the flow resumed: the republished records, never the originals
    copied = read_all(broker_pair.dc2.config, topic)
    assert [hops(m.headers())[-1].offset for m in copied] == [*range(97), 100, 101, 102]
    assert [m.value() for m in copied[97:]] == [b"v97", b"v98", b"v99"]  # each record once in dc2
