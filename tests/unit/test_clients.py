"""Client settings from a topology and the environment: the topology's bootstrap, the cluster's variable on top of
the defaults, keyword overrides last; malformed variables named without their value; secrets redacted."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from support.fakes import FakeGroupAdmin, patch_sleep

from kafka_dr import clients as clients_module
from kafka_dr.access import ClusterAccess, config_env_var
from kafka_dr.clients import (
    GROUPS_IN_FLIGHT,
    LIBRDKAFKA_LOG,
    ClientConfigError,
    describe_groups,
    error_text,
    list_group_offsets,
    redact,
)
from kafka_dr.topology import parse_topology
from kafka_dr.translation.groups import apply_offsets

TOPOLOGY = parse_topology({"clusters": {"us-east": {"bootstrap_servers": "10.0.0.1:9092"}}})
SECRET = "s3cret-never-shown"


def test_defaults_then_the_clusters_variable_then_keyword_overrides() -> None:
    assert config_env_var("us-east") == "KDR_CLUSTER_US_EAST_CONFIG"
    plain = ClusterAccess.from_environ(TOPOLOGY, {})
    assert plain.config("us-east") == {"bootstrap.servers": "10.0.0.1:9092", "logger": LIBRDKAFKA_LOG}
    environ = {"KDR_CLUSTER_US_EAST_CONFIG": json.dumps({"log_level": 7, "security.protocol": "SSL"})}
    secured = ClusterAccess.from_environ(TOPOLOGY, environ)
    assert secured.config("us-east", enable_idempotence=True, security_protocol="SASL_SSL") == {
        "bootstrap.servers": "10.0.0.1:9092",
        "logger": LIBRDKAFKA_LOG,
        "log_level": 7,
        "security.protocol": "SASL_SSL",
        "enable.idempotence": True,
    }


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (f'{{"sasl.password": "{SECRET}"', "not a JSON object"),
        (json.dumps([SECRET]), "must be a JSON object of librdkafka settings"),
        (json.dumps({"sasl.password": {"nested": SECRET}}), "must be a JSON object of librdkafka settings"),
    ],
)
def test_a_malformed_variable_is_one_line_naming_it_and_not_its_value(raw: str, message: str) -> None:
    with pytest.raises(ClientConfigError, match=f"^KDR_CLUSTER_US_EAST_CONFIG: {message}") as error:
        ClusterAccess.from_environ(TOPOLOGY, {"KDR_CLUSTER_US_EAST_CONFIG": raw})
    assert SECRET not in str(error.value) and "\n" not in str(error.value)


def test_redact_hides_secret_looking_keys_only() -> None:
    settings = {"sasl.password": SECRET, "sasl.username": "alice", "ssl.key.pem": SECRET, "acks": "all"}
    assert redact(settings) == {"sasl.password": "***", "sasl.username": "alice", "ssl.key.pem": "***", "acks": "all"}


def test_error_text_is_librdkafkas_own_line() -> None:
    error = KafkaException(KafkaError(KafkaError._TRANSPORT, "broker down:\n  connection refused"))
    assert error_text(error) == "broker down: connection refused"
    assert error_text(ValueError()) == "ValueError"


def test_group_offsets_are_listed_only_once_every_coordinator_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """confluent-kafka 2.16.1 segfaults on a NOT_COORDINATOR answer to ListConsumerGroupOffsets, which a starting
    Apache Kafka gives: the offsets are asked for only after DescribeGroups stops answering it."""
    patch_sleep(monkeypatch, clients_module, lambda _: None)
    admin = FakeGroupAdmin()
    admin.loading = {"billing": 2}
    admin.committed = {"billing": [TopicPartition("orders", 0, 7)], "audit": []}
    requests = [ConsumerGroupTopicPartitions("billing"), ConsumerGroupTopicPartitions("audit")]
    futures = list_group_offsets(admin, requests, 5)
    assert [tp.offset for tp in futures["billing"].result().topic_partitions] == [7]
    assert admin.asked == [
        ("describe", "billing"),
        ("describe", "audit"),
        ("describe", "billing"),
        ("describe", "billing"),
        ("list", "billing"),
        ("list", "audit"),
    ]


def test_a_describe_that_timed_out_is_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A node just started on loaded cores may drop a DescribeGroups: each attempt waits a few seconds, not the
    caller's whole deadline, and the request is asked again."""
    patch_sleep(monkeypatch, clients_module, lambda _: None)
    admin = FakeGroupAdmin()
    admin.busy, admin.loading, admin.members = KafkaError(KafkaError._TIMED_OUT), {"billing": 1}, {"billing": 0}
    assert describe_groups(admin, ["billing"], 30)["billing"].members == []
    assert admin.asked == [("describe", "billing")] * 2
    assert max(admin.describe_timeouts) <= clients_module.DESCRIBE_ATTEMPT_S, admin.describe_timeouts


def test_a_coordinator_that_never_answers_is_a_timeout_and_nothing_is_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(range(0, 1000, 10))
    patch_sleep(monkeypatch, clients_module, lambda _: None)
    monkeypatch.setattr(clients_module.time, "monotonic", lambda: float(next(clock)))
    admin = FakeGroupAdmin()
    admin.loading = {"billing": 1000}
    with pytest.raises(TimeoutError, match="the coordinator of group billing is still loading after 15 s"):
        list_group_offsets(admin, [ConsumerGroupTopicPartitions("billing")], 15)
    assert ("list", "billing") not in admin.asked


def test_group_requests_go_out_a_window_at_a_time() -> None:
    """librdkafka 2.16 aborts the process when a group coordinator request times out while still queued, as the last
    of a thousand sent at once do on loaded cores: describing, listing and committing keep at most GROUPS_IN_FLIGHT
    requests unanswered, and every group is still answered."""
    admin = FakeGroupAdmin()
    admin.latency = 0.002
    groups = [f"group-{i}" for i in range(157)]
    admin.committed = {group: [TopicPartition("orders", 0, i)] for i, group in enumerate(groups)}
    listed = list_group_offsets(admin, [ConsumerGroupTopicPartitions(group) for group in groups], 5)
    assert [listed[g].result(5).topic_partitions[0].offset for g in groups] == list(range(len(groups)))
    applied = apply_offsets(admin, {group: [TopicPartition("orders", 0, 1)] for group in groups}, 5)
    assert [a.group for a in applied if a.applied] == sorted(groups)
    assert admin.most_in_flight == GROUPS_IN_FLIGHT < len(groups)
