"""The driver's clients of a flow (replication/flow_clients.py): constructing connects to nothing, entering connects
and leaving closes; a cluster call is retried with back-off, then fails in one line naming the cluster."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException
from support.fakes import patch_sleep

from kafka_dr.access import ClusterAccess
from kafka_dr.replication import flow_clients
from kafka_dr.replication.flow_clients import FlowClients
from kafka_dr.topology import Flow, TopicFilter, parse_topology

FLOW = Flow("dc1-to-dc2", "dc1", "dc2", TopicFilter((re.compile(".*"),)))


ACCESS = ClusterAccess(
    parse_topology({"clusters": {"dc1": {"bootstrap_servers": "dc1:9092"}, "dc2": {"bootstrap_servers": "dc2:9092"}}})
)


class Admin:
    """An AdminClient whose cluster answers with its id after `refusals` refused attempts."""

    made: list[Admin] = []

    def __init__(self, config: dict) -> None:
        self.config, self.asked = config, 0
        Admin.made.append(self)

    def describe_cluster(self, request_timeout: float):
        self.asked += 1
        servers = self.config["bootstrap.servers"]
        if servers == "dc2:9092" and self.asked == 1:  # the target refuses once
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Connection refused"))
        return SimpleNamespace(result=lambda: SimpleNamespace(cluster_id=f"id-{servers}"))


class Reader:
    made: list[Reader] = []

    def __init__(self, config: dict) -> None:
        self.config, self.closed = config, False
        Reader.made.append(self)

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch) -> FlowClients:
    Admin.made, Reader.made = [], []
    monkeypatch.setattr(flow_clients, "AdminClient", Admin)
    monkeypatch.setattr(flow_clients, "Consumer", Reader)
    patch_sleep(monkeypatch, flow_clients, lambda seconds: None)
    return FlowClients(ACCESS, FLOW, retries=2)


def test_constructing_connects_to_nothing_entering_connects_and_leaving_closes(clients: FlowClients) -> None:
    assert (Admin.made, Reader.made, clients.reader) == ([], [], None)
    assert (clients.source_config["bootstrap.servers"], clients.target_config["bootstrap.servers"]) == (
        "dc1:9092",
        "dc2:9092",
    )
    with clients as entered:
        assert entered is clients
        assert (clients.source_cluster_id, clients.target_cluster_id) == ("id-dc1:9092", "id-dc2:9092")
        assert [admin.asked for admin in Admin.made] == [1, 2]  # the target answered on its second attempt
        (reader,) = Reader.made
        assert reader.config["isolation.level"] == "read_committed" and reader.config["group.id"] == "dc1-to-dc2-resume"
        assert not reader.closed
    assert reader.closed and clients.reader is None
    clients.close()  # closing again, or unopened, is harmless


def test_with_retries_backs_off_then_fails_with_one_line_naming_the_cluster(monkeypatch) -> None:
    sleeps: list[float] = []
    patch_sleep(monkeypatch, flow_clients, sleeps.append)
    calls = []

    def refused() -> None:
        calls.append(1)
        raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Connection refused"))

    with pytest.raises(flow_clients.UnreachableError) as failed:
        flow_clients.with_retries("source cluster dc1 (127.0.0.1:1)", refused, attempts=3)
    assert (len(calls), sleeps) == (3, [1.0, 2.0])
    assert str(failed.value) == "source cluster dc1 (127.0.0.1:1) unreachable after 3 attempts: Connection refused"
    with pytest.raises(flow_clients.UnreachableError, match="unreachable after 1 attempt: "):
        flow_clients.with_retries("target cluster dc2", refused, attempts=1)
    answers = iter([TimeoutError("slow"), "cluster-id"])

    def flaky() -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert flow_clients.with_retries("dc1", flaky) == "cluster-id"
