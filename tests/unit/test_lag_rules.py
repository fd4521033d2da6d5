"""Pure rules of lag gating, its JSON form and table, heartbeat values and topic-sync naming: no Kafka needed."""

from __future__ import annotations

import json
import re
from types import MappingProxyType

import pytest

from kafka_dr.lag_report import render_table
from kafka_dr.replication.heartbeat import Heartbeat, parse_heartbeat
from kafka_dr.replication.internal import HEARTBEATS
from kafka_dr.replication.lag import FlowLag, PartitionLag, check_thresholds
from kafka_dr.replication.topic_sync import TopicSyncError, _destinations, excluded
from kafka_dr.topology import Flow, TopicFilter


def lag_of(*partitions: PartitionLag, heartbeat: float | None = 0.25) -> FlowLag:
    return FlowLag("dc1-to-dc2", "dc1", "dc2", partitions, heartbeat, 1_700_000_000_000)


P0 = PartitionLag("topic1", 0, "topic1", 100, 150, 40, 3.5)  # 10 of the 50 offsets are transaction markers
P1 = PartitionLag("topic2", 3, "topic2.replica", 0, 90_000, 90_000, 12.25, estimated=True)
IDLE = PartitionLag("topic1", 1, "topic1", 7, 7, 0, 0.0)


def test_totals() -> None:
    lag = lag_of(P0, P1, IDLE)
    assert (lag.total_records, lag.max_records, lag.max_seconds) == (90_040, 90_000, 12.25)
    empty = lag_of()
    assert (empty.total_records, empty.max_records, empty.max_seconds) == (0, 0, 0.0)


def test_json_round_trip_survives_serialisation() -> None:
    lag = lag_of(P0, P1, IDLE, heartbeat=None)
    data = json.loads(json.dumps(lag.to_json()))
    assert FlowLag.from_json(data) == lag
    assert data["total_records"] == 90_040 and data["partitions"][1]["estimated"] is True


def test_from_json_recomputes_totals() -> None:
    data = lag_of(P0).to_json() | {"total_records": 999, "max_seconds": 999.0}
    assert FlowLag.from_json(data).total_records == 40


def test_within_limits() -> None:
    ok, reason = check_thresholds(lag_of(P0, IDLE), max_records=40, max_seconds=3.5)  # limits are inclusive
    assert ok
    assert reason == "flow dc1-to-dc2: within limits (worst dc1:topic1[0] 40 records, dc1:topic1[0] 3.5 s)"


def test_records_limit_names_the_worst_partition() -> None:
    ok, reason = check_thresholds(lag_of(P0, P1, IDLE), max_records=1_000, max_seconds=None)
    assert not ok
    assert reason == "flow dc1-to-dc2: dc1:topic2[3] lags about 90,000 records (limit 1,000)"


def test_seconds_limit_names_the_worst_partition() -> None:
    ok, reason = check_thresholds(lag_of(P0, IDLE), max_records=None, max_seconds=1)
    assert not ok
    assert reason == "flow dc1-to-dc2: dc1:topic1[0] lags 3.5 s (limit 1 s)"


def test_both_limits_broken_are_both_reported() -> None:
    ok, reason = check_thresholds(lag_of(P0, P1), max_records=0, max_seconds=0)
    assert not ok and "90,000 records" in reason and "12.2 s" in reason and "\n" not in reason


def test_no_limits_and_no_partitions_pass() -> None:
    assert check_thresholds(lag_of(P1), None, None)[0]
    assert check_thresholds(lag_of(), 0, 0) == (True, "flow dc1-to-dc2: no source partitions to copy")


def test_negative_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="max_seconds must be >= 0, got -1"):
        check_thresholds(lag_of(P0), None, -1)


def test_table_marks_estimates_and_reports_heartbeat() -> None:
    lines = render_table([lag_of(P0, P1), lag_of(IDLE, heartbeat=None)]).splitlines()
    assert lines[0].split() == [
        "FLOW",
        "TOPIC",
        "PARTITION",
        "DEST",
        "TOPIC",
        "NEXT",
        "END",
        "LAG",
        "RECORDS",
        "LAG",
        "SECONDS",
    ]
    assert lines[1].split() == ["dc1-to-dc2", "topic1", "0", "topic1", "100", "150", "40", "3.500"]
    assert lines[2].split() == ["dc1-to-dc2", "topic2", "3", "topic2.replica", "0", "90000", "~90000", "12.250"]
    assert lines[4] == (
        "flow dc1-to-dc2 (dc1 -> dc2): 2 partitions, 90040 records behind, oldest uncopied 12.250 s, "
        "heartbeat latency 0.250 s"
    )
    assert lines[5].endswith("heartbeat latency no heartbeat copied yet")


def test_heartbeat_value_round_trip() -> None:
    heartbeat = Heartbeat("dc1-to-dc2", "ab" * 16, 1_700_000_000_123)
    assert parse_heartbeat(heartbeat.encode()) == heartbeat
    assert json.loads(heartbeat.encode()) == {"flow": "dc1-to-dc2", "id": "ab" * 16, "created_ms": 1_700_000_000_123}


@pytest.mark.parametrize(
    "value",
    [None, b"", b"not json", b"[1]", b'{"flow": "f", "id": "x"}', b'{"flow": "f", "id": "x", "created_ms": "soon"}'],
)
def test_bad_heartbeat_value_is_refused(value: bytes | None) -> None:
    with pytest.raises(ValueError, match="not a heartbeat record value"):
        parse_heartbeat(value)


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
