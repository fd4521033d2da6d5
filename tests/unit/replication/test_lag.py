"""Pure rules of lag gating and its JSON form, and how a cluster's errors are told apart: no Kafka needed."""

from __future__ import annotations

import json
from concurrent.futures import Future

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec
from support.fakes import FakeMessage
from support.lag import IDLE, P0, P1, lag_of

from kafka_dr.access import ClusterAccess
from kafka_dr.replication import lag
from kafka_dr.replication.lag import ClusterSide, FlowLag, check_thresholds, heartbeat_latency
from kafka_dr.replication.provenance import HEADER, Hop
from kafka_dr.topology import parse_topology


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


def side() -> ClusterSide:
    topology = parse_topology({"clusters": {"dc2": {"bootstrap_servers": "127.0.0.1:1"}}})
    return ClusterSide("target", "f", ClusterAccess(topology), "dc2", 5.0)


@pytest.mark.parametrize(
    ("code", "answered"),
    [
        (KafkaError.NOT_LEADER_FOR_PARTITION, True),  # Apache Kafka, a partition whose leader moves or is loading
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, True),
        (KafkaError._TRANSPORT, False),
        (KafkaError._TIMED_OUT, False),
        (KafkaError._ALL_BROKERS_DOWN, False),
    ],
)
def test_only_a_cluster_that_did_not_answer_is_named_unreachable(code: int, answered: bool) -> None:
    """What a health run proposes a failover for: a cluster that answered with an error is not lost."""
    error = side().error("list offsets", KafkaException(KafkaError(code)))
    assert (error.cluster, error.answered) == ("dc2", answered)
    assert str(error).startswith("flow f: target cluster dc2 (127.0.0.1:1): list offsets failed: ")


def test_offsets_a_stale_leader_refused_are_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    refused: Future = Future()
    refused.set_exception(KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION)))
    asked = []

    def offsets_of(admin, partitions, spec, isolation, timeout):  # clients.offsets_of: refreshes metadata, retries
        asked.append(partitions)
        return {key: 7 for key in partitions}

    monkeypatch.setattr(lag, "offsets_of", offsets_of)
    assert side().answered_offsets({TopicPartition("t", 0): refused}, OffsetSpec.latest()) == {("t", 0): 7}
    assert asked == [[("t", 0)]]


def test_no_heartbeat_copied_from_the_source_means_no_latency() -> None:
    """Before the flow copied a heartbeat (none at all, one not a copy, one copied from another cluster): None."""
    local = FakeMessage("_kdr.heartbeats", 0, 0, timestamp=1_000)
    elsewhere = FakeMessage("_kdr.heartbeats", 0, 1, headers=[(HEADER, Hop("other", "h", 0, 0, 1_500).encode())])
    assert heartbeat_latency([], "dc2-id") is None
    assert heartbeat_latency([local, elsewhere], "dc2-id") is None
    copied = FakeMessage(
        "_kdr.heartbeats", 0, 2, timestamp=1_000, headers=[(HEADER, Hop("dc2-id", "h", 0, 0, 1_250).encode())]
    )
    assert heartbeat_latency([local, elsewhere, copied], "dc2-id") == 0.25
