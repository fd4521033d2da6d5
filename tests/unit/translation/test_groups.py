"""A flow's consumer groups on the driver (translation/groups.py), on a fake admin: which groups are translated,
what they committed in the source, one request per source partition, and offsets applied in the target only to
groups without active members there."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, TopicPartition
from support.fakes import FakeGroupAdmin, patch_sleep

from kafka_dr.topology import parse_topology
from kafka_dr.translation import groups as groups_module
from kafka_dr.translation.groups import (
    Applied,
    apply_offsets,
    by_group,
    committed_offsets,
    list_groups,
    own_groups,
    plan_requests,
    select_groups,
)
from kafka_dr.translation.offsets import PartitionRequest, Translated

TOPOLOGY = parse_topology(
    {
        "clusters": {"dc1": {"bootstrap_servers": "dc1:9092"}, "dc2": {"bootstrap_servers": "dc2:9092"}},
        "flows": [
            {
                "name": "dc1-to-dc2",
                "source": "dc1",
                "target": "dc2",
                "topics": {"include": ["orders", "payments"]},
                "rename": {"payments": "{topic}.replica"},
                "groups": {"include": [".*"], "exclude": ["console-consumer-.*"]},
            },
            {"name": "dc2-to-dc1", "source": "dc2", "target": "dc1", "topics": {"include": ["audit"]}},
        ],
    }
)
FLOW = TOPOLOGY.flow("dc1-to-dc2")
SOURCE, TARGET = {"bootstrap.servers": "dc1:9092"}, {"bootstrap.servers": "dc2:9092"}


def test_kafka_drs_own_groups_are_each_flows_and_its_failback_inverses_with_their_readers() -> None:
    assert own_groups(TOPOLOGY) == {
        "dc1-to-dc2",
        "dc1-to-dc2-resume",
        "dc1-to-dc2-watermarks",
        "dc1-to-dc2.failback",
        "dc1-to-dc2.failback-resume",
        "dc1-to-dc2.failback-watermarks",
        "dc2-to-dc1",
        "dc2-to-dc1-resume",
        "dc2-to-dc1-watermarks",
        "dc2-to-dc1.failback",
        "dc2-to-dc1.failback-resume",
        "dc2-to-dc1.failback-watermarks",
    }


def test_selected_groups_are_the_flows_groups_but_kafka_drs_own_and_internal_ones() -> None:
    names = ["billing", "dc2-to-dc1-resume", "_kdr.health", "console-consumer-1", "audit", "billing-eu", "dc1-to-dc2"]
    assert select_groups(names, FLOW, TOPOLOGY, None) == ["audit", "billing", "billing-eu"]
    assert select_groups(names, FLOW, TOPOLOGY, re.compile("billing")) == ["billing"]  # the pattern matches fully


def test_listed_groups_are_the_clusters_groups() -> None:
    admin = FakeGroupAdmin()
    admin.members = {"billing": 1, "audit": 0}
    assert sorted(list_groups(admin, 5)) == ["audit", "billing"]


def test_committed_offsets_keep_the_flows_topics_and_real_offsets_only() -> None:
    admin = FakeGroupAdmin()
    admin.committed = {
        "billing": [
            TopicPartition("orders", 0, 10),
            TopicPartition("orders", 1, -1001),  # no committed offset
            TopicPartition("payments", 2, 7),
            TopicPartition("audit", 0, 3),  # not a topic of the flow
        ],
        "audit-reader": [TopicPartition("audit", 0, 5)],
        "broken": [SimpleNamespace(topic="orders", partition=0, offset=4, error=KafkaError(KafkaError._TIMED_OUT))],
    }
    committed = committed_offsets(admin, ["billing", "audit-reader", "broken", "idle"], FLOW, 5)
    assert committed == {"billing": {("orders", 0): 10, ("payments", 2): 7}}


def test_one_request_per_source_partition_with_every_groups_offsets_there() -> None:
    committed = {
        "billing": {("orders", 0): 10, ("payments", 2): 7},
        "shipping": {("orders", 0): 4, ("orders", 1): 9},
        "audit": {("orders", 0): 10},
    }
    ends = {("orders", 0): 100, ("orders", 1): 50, ("payments", 2): 70}
    unseen = {("payments.replica", 2): 33, ("payments", 2): 1}  # keyed by destination topic
    requests = plan_requests(committed, FLOW, SOURCE, TARGET, "dc1-id", ends, unseen)
    assert requests == [
        PartitionRequest(SOURCE, TARGET, "dc1-id", "orders", 0, "orders", (4, 10), 100, True, None),
        PartitionRequest(SOURCE, TARGET, "dc1-id", "orders", 1, "orders", (9,), 50, True, None),
        PartitionRequest(SOURCE, TARGET, "dc1-id", "payments", 2, "payments.replica", (7,), 70, True, 33),
    ]
    assert plan_requests({}, FLOW, SOURCE, TARGET, "dc1-id", ends) == []


def test_translations_go_back_to_every_group_that_committed_them() -> None:
    committed = {"shipping": {("orders", 1): 9, ("orders", 0): 4}, "billing": {("orders", 0): 4}}
    translated = [
        Translated("orders", 0, 4, "orders", 40, "provenance"),
        Translated("orders", 1, 9, "orders", 90, "provenance"),
        Translated("orders", 0, 5, "orders", 50, "provenance"),  # no group committed it
    ]
    assert by_group(committed, translated) == {
        "billing": [translated[0]],
        "shipping": [translated[0], translated[1]],
    }


def test_offsets_are_applied_only_to_groups_without_active_members() -> None:
    admin = FakeGroupAdmin()
    admin.members = {"busy": 1, "idle": 0}  # "new" is unknown in the target
    admin.refuse = {"refused": KafkaError(KafkaError.UNKNOWN_MEMBER_ID, "member gone")}
    admin.members["refused"] = 0
    offsets = {name: [TopicPartition("orders", 0, 40)] for name in ("new", "busy", "refused", "idle")}
    assert apply_offsets(admin, offsets, 5) == [
        Applied("busy", False, "1 active member(s) in the target"),
        Applied("idle", True),
        Applied("new", True),
        Applied("refused", False, "commit refused: member gone"),
    ]
    assert sorted(group for group, _ in admin.commits) == ["idle", "new"]
    assert [(tp.topic, tp.partition, tp.offset) for tp in admin.commits[0][1]] == [("orders", 0, 40)]


def test_a_commit_refused_partition_by_partition_is_not_applied_and_a_busy_coordinator_is_asked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Apache Kafka answers a commit's errors per partition, the future succeeding: NOT_COORDINATOR while the group's
    coordinator loads (right after a start) is asked again; UNKNOWN_TOPIC_OR_PART is a group not applied."""
    patch_sleep(monkeypatch, groups_module, lambda _: None)
    admin = FakeGroupAdmin()
    admin.members = {"loading": 0, "missing": 0}
    admin.partition_errors = {
        "loading": [KafkaError(KafkaError.NOT_COORDINATOR, "Broker: Not coordinator")] * 2,
        "missing": [KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART, "Broker: Unknown topic or partition")],
    }
    offsets = {name: [TopicPartition("orders", 0, 40)] for name in ("loading", "missing")}
    assert apply_offsets(admin, offsets, 5) == [
        Applied("loading", True),
        Applied("missing", False, "commit refused: Broker: Unknown topic or partition"),
    ]
    assert [group for group, _ in admin.commits] == ["loading"]


def test_no_groups_to_apply_asks_nothing() -> None:
    admin = FakeGroupAdmin()
    assert apply_offsets(admin, {}, 5) == [] and admin.commits == []
