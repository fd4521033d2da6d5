"""Which records past a flow's position never left the restored cluster, as runs of offsets: the cycle rule keeps
the serving cluster's own records out of them, and offsets the client never delivers do not split a run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.fakes import FakeMessage

from kafka_dr.access import ClusterAccess
from kafka_dr.codec import decode, encode
from kafka_dr.failback.plan import FailbackPlan
from kafka_dr.failback.republish import Handled, handle
from kafka_dr.failback.unreplicated import (
    DeletedRange,
    Measured,
    Unreplicated,
    UnreplicatedRange,
    unreplicated_of,
    unreplicated_ranges,
)
from kafka_dr.replication.provenance import HEADER, Hop
from kafka_dr.replication.rounds import Lost
from kafka_dr.topology import Topology, load_topology

SERVING = "dc2-id"


def record(offset: int, partition: int = 0, topic: str = "orders", came_from: tuple[str, str] | None = None):
    """A record of the restored cluster; `came_from` (cluster id, topic): it is a copy from there."""
    headers = None if came_from is None else [(HEADER, Hop(*came_from, partition, offset, 1).encode())]
    return FakeMessage(topic, partition, offset, b"k", b"v", headers, timestamp=1000)


def ranges(*records: FakeMessage, dest: str = "orders") -> list[tuple[int, int, int, int]]:
    found = unreplicated_ranges(records, "f", SERVING, {"orders": dest})
    assert all(isinstance(r, UnreplicatedRange) and r.flow == "f" and r.topic == "orders" for r in found)
    return [(r.partition, r.from_offset, r.to_offset, r.records) for r in found]


def test_consecutive_records_are_one_run() -> None:
    assert ranges(record(9998), record(9999)) == [(0, 9998, 9999, 2)]


def test_offsets_never_delivered_between_records_do_not_split_a_run() -> None:
    assert ranges(record(10), record(12), record(15)) == [(0, 10, 15, 3)]  # 11, 13, 14: markers, aborted


def test_a_copy_from_the_serving_cluster_is_not_unreplicated_and_splits_the_run() -> None:
    back = ("dc2-id", "orders")
    assert ranges(record(1), record(2, came_from=back), record(3), record(4)) == [(0, 1, 1, 1), (0, 3, 4, 2)]


def test_the_cycle_rule_is_applied_to_the_destination_topic_of_a_renamed_flow() -> None:
    back = ("dc2-id", "dc1.orders")
    assert ranges(record(1, came_from=back), record(2), dest="dc1.orders") == [(0, 2, 2, 1)]
    assert ranges(record(1, came_from=back), dest="orders") == [(0, 1, 1, 1)]  # names another topic: copied


def test_a_copy_from_a_third_cluster_still_has_to_leave() -> None:
    assert ranges(record(5, came_from=("dc3-id", "orders"))) == [(0, 5, 5, 1)]


def test_a_record_with_malformed_provenance_never_left_either() -> None:
    bad = FakeMessage("orders", 0, 7, b"k", b"v", [(HEADER, b"not a hop")], timestamp=1000)
    assert ranges(bad) == [(0, 7, 7, 1)]


def test_partitions_are_kept_apart_and_sorted() -> None:
    assert ranges(record(4, partition=1), record(3, partition=0), record(5, partition=1)) == [
        (0, 3, 3, 1),
        (1, 4, 5, 2),
    ]


def test_nothing_past_the_position_is_nothing_unreplicated() -> None:
    assert ranges() == []


def test_what_never_left_is_measured_with_its_ranges_and_what_retention_deleted_inclusive() -> None:
    ranges_ = (UnreplicatedRange("f", "orders", 0, 9998, 9999, 2), UnreplicatedRange("f", "orders", 1, 5, 5, 1))
    found = Unreplicated("dc1", "dc2", ("f",), ranges_, (Lost("orders", 1, 0, 5),))
    measured = found.measured()
    assert (measured.records, measured.per_topic, measured.flows, measured.ranges) == (
        3,
        {"orders": 3},
        ("f",),
        ranges_,
    )
    assert measured.deleted_before_copied == (DeletedRange("orders", 1, 0, 4),)  # Lost's end is exclusive
    fields = json.loads(json.dumps(encode(measured)))  # the XCom, and the report's `unreplicated` fields
    assert fields["deleted_before_copied"] == [{"topic": "orders", "partition": 1, "from_offset": 0, "to_offset": 4}]
    assert decode(Measured, fields) == measured


PLAN = FailbackPlan("t.yaml", "dc1", "dc1-id", "dc2", "data_lost", "republish", ".*", False, ("f",), ())


@pytest.fixture
def topology(tmp_path: Path) -> Topology:
    """Two clusters nobody listens on: nothing here may reach them."""
    path = tmp_path / "t.yaml"
    path.write_text('clusters:\n  dc1: {bootstrap_servers: "127.0.0.1:1"}\n  dc2: {bootstrap_servers: "127.0.0.1:2"}\n')
    return load_topology(path)


def test_a_cluster_that_lost_its_data_has_nothing_to_measure(topology: Topology) -> None:
    assert encode(unreplicated_of(ClusterAccess(topology), PLAN)) == {
        "records": None,
        "per_topic": {},
        "ranges": [],
        "note": "dc1 lost its data: what never left it is gone, the failover report's estimate stands",
    }


def test_no_range_never_left_is_nothing_to_republish(topology: Topology) -> None:
    assert handle(ClusterAccess(topology), PLAN, Measured(records=None, per_topic={}, ranges=())) == Handled(
        "republish", 0
    )
