"""FollowingConsumer's pure parts: a record's origin, the per-origin memory that drops what was delivered, and the
topic names it subscribes to in each cluster."""

from __future__ import annotations

from support.fakes import FakeMessage
from support.topology import write_topology

from kafka_dr.follower import DeliveredOrigins, FollowingConsumer, origin_of
from kafka_dr.replication.provenance import HEADER, Hop
from kafka_dr.topology import load_topology
from kafka_dr.wire import REPUBLISHED_HEADER


def hop(cluster_id: str, topic: str, partition: int, offset: int) -> tuple[str, bytes]:
    return HEADER, Hop(cluster_id, topic, partition, offset, 1_700_000_000_000).encode()


def test_a_local_record_is_its_own_origin():
    assert origin_of(FakeMessage("orders", 2, 41, headers=[("trace", b"x")]), "dc2-id") == (("dc2-id", "orders", 2), 41)


def test_a_copy_names_its_first_hop_whatever_the_topic_or_partition_it_landed_in():
    copy = FakeMessage(
        "orders.replica", 0, 7, headers=[hop("dc1-id", "orders", 3, 90), hop("dc2-id", "orders.x", 0, 7)]
    )
    assert origin_of(copy, "dc3-id") == (("dc1-id", "orders", 3), 90)


def test_a_republished_record_is_the_original_it_names_even_once_copied():
    republished = FakeMessage("orders", 0, 500, headers=[(REPUBLISHED_HEADER, b"dc1-id,orders,0,120")])
    assert origin_of(republished, "dc1-id") == (("dc1-id", "orders", 0), 120)
    copied = FakeMessage(
        "orders", 0, 80, headers=[(REPUBLISHED_HEADER, b"dc1-id,orders,0,120"), hop("dc1-id", "orders", 0, 500)]
    )
    assert origin_of(copied, "dc2-id") == (("dc1-id", "orders", 0), 120)


def test_a_malformed_header_makes_the_record_its_own_origin_rather_than_a_guess():
    for header in [(HEADER, b"not,a,hop"), (REPUBLISHED_HEADER, b"\xff")]:
        assert origin_of(FakeMessage("orders", 1, 5, headers=[header]), "dc2-id") == (("dc2-id", "orders", 1), 5)


def test_delivered_origins_drop_what_was_delivered_per_origin_partition():
    delivered = DeliveredOrigins()
    dc1, dc2 = ("dc1-id", "orders", 0), ("dc2-id", "orders", 0)
    assert [delivered.first_time(dc1, offset) for offset in (0, 1, 2)] == [True, True, True]
    # After a switch: the group resumes at a checkpoint behind what was delivered, in a cluster with its own records.
    read_again = [(dc1, 1), (dc1, 2), (dc2, 0), (dc1, 3), (dc2, 1), (dc2, 1)]
    assert [delivered.first_time(*record) for record in read_again] == [False, False, True, True, True, False]


def test_a_consumer_subscribes_in_another_cluster_to_the_names_its_flows_give_the_copies_too(tmp_path):
    topology = load_topology(
        write_topology(
            tmp_path / "t.yaml",
            {"dc1": "127.0.0.1:1", "dc2": "127.0.0.1:2"},
            '  - {name: out, source: dc1, target: dc2, topics: {include: ["orders", "refunds"]}, '
            'rename: {"orders": "{source}.{topic}"}}\n'
            "  - {name: back, source: dc2, target: dc1, topics: {include: [orders]}}",
            extra="clients:\n  billing: {cluster: dc1, role: consumer}",
        )
    )
    consumer = FollowingConsumer(topology, "billing", ["orders", "refunds", "audit"], {"group.id": "g"})
    assert consumer.topics_in("dc1") == ["orders", "refunds", "audit"]  # home: the names as given
    assert consumer.topics_in("dc2") == ["orders", "refunds", "audit", "dc1.orders"]  # the copies too; no duplicate
