"""Topic sync's pure parts: which topic configs are not copied, and the destination names of a flow's topics."""

from __future__ import annotations

import re
from types import MappingProxyType

import pytest

from kafka_dr.replication.internal import HEARTBEATS
from kafka_dr.replication.topic_sync import TopicSyncError, _destinations, excluded
from kafka_dr.topology import Flow, TopicFilter


@pytest.mark.parametrize(
    ("key", "skipped"),
    [
        ("min.insync.replicas", True),
        ("leader.replication.throttled.replicas", True),
        ("message.timestamp.type", True),
        ("message.timestamp.before.max.ms", True),
        ("confluent.placement.constraints", True),
        ("retention.ms", False),
        ("cleanup.policy", False),
        ("segment.bytes", False),
    ],
)
def test_config_exclusions(key: str, skipped: bool) -> None:
    assert excluded(key) is skipped


def flow(rename: dict[str, str]) -> Flow:
    return Flow("f", "dc1", "dc2", TopicFilter(include=(re.compile(".*"),)), rename=MappingProxyType(rename))


def test_destinations_rename_data_topics_only() -> None:
    dests = _destinations(flow({".*": "{topic}.replica"}), {"a": 1, HEARTBEATS: 1})
    assert dests == {"a": "a.replica", HEARTBEATS: HEARTBEATS}


def test_two_sources_into_one_destination_are_refused() -> None:
    with pytest.raises(TopicSyncError, match=r"source topics dc1:a and dc1:b would both be copied to dc2:merged"):
        _destinations(flow({"a|b": "merged"}), {"a": 1, "b": 1})


def test_rename_into_internal_namespace_is_refused() -> None:
    with pytest.raises(TopicSyncError, match=r"dc1:progress would be copied to dc2:_kdr.progress"):
        _destinations(flow({"progress": "_kdr.{topic}"}), {"progress": 1})
