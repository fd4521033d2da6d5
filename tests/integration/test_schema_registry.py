"""The embedded schema registry against embedded brokers: Confluent serdes, follower reads and
forwarding, a leader loss, and the DR redirect of a follower to a replicated ``_schemas``.

The tests run in file order on one module-scoped stack (dc1 and dc2 brokers, a leader-eligible
registry and a follower, both on dc1's store), as the DR cycle does; every process runs on a free
port with a temporary data dir and is killed in the fixture's finalizer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext
from support.retry import eventually
from support.servers import ApacheBroker, RegistryProcess, ServerProcess

pytestmark = pytest.mark.integration

TOPIC = "kdr-sr-users"
SUBJECT = f"{TOPIC}-value"


def avro(*fields: dict[str, object]) -> str:
    return json.dumps({"type": "record", "name": "User", "namespace": "kdr.test", "fields": list(fields)})


USER_V1 = avro({"name": "id", "type": "long"}, {"name": "name", "type": "string"})
USER_V2 = avro(
    {"name": "id", "type": "long"},
    {"name": "name", "type": "string"},
    {"name": "email", "type": ["null", "string"], "default": None},
)
USER_V3 = avro(
    {"name": "id", "type": "long"},
    {"name": "name", "type": "string"},
    {"name": "email", "type": ["null", "string"], "default": None},
    {"name": "team", "type": "string", "default": "none"},
)
USER_V4 = avro(
    {"name": "id", "type": "long"},
    {"name": "name", "type": "string"},
    {"name": "email", "type": ["null", "string"], "default": None},
    {"name": "team", "type": "string", "default": "none"},
    {"name": "site", "type": "string", "default": "dc2"},
)


class Stack:
    def __init__(self, tmp: Path) -> None:
        self.dc1 = ApacheBroker("dc1-broker", tmp / "dc1-broker")
        self.dc2 = ApacheBroker("dc2-broker", tmp / "dc2-broker")
        self.leader = RegistryProcess("dc1-registry", tmp, self.dc1.bootstrap, eligible=True)
        self.follower = RegistryProcess("dc2-registry", tmp, self.dc1.bootstrap, eligible=False)
        self.servers: list[ServerProcess] = [self.dc1, self.dc2, self.leader, self.follower]
        self.payloads: list[bytes] = []  # records serialized through the registries, for later tests

    def logs(self) -> str:
        return "\n".join(f"--- {s.name}\n{s.log_tail()}" for s in self.servers if s.log_path.exists())


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    stack = Stack(tmp_path_factory.mktemp("schema-registry"))
    try:
        try:
            for server in stack.servers:
                server.start()
            eventually(lambda: stack.leader.leader()["is_leader"], "dc1 registry to lead")
            eventually(lambda: stack.follower.leader()["leader"] == stack.leader.url, "follower to see the leader")
        except (AssertionError, RuntimeError) as exc:
            pytest.fail(f"{exc}\n{stack.logs()}")
        yield stack
    finally:
        for server in reversed(stack.servers):
            server.kill()


def _ctx() -> SerializationContext:
    return SerializationContext(TOPIC, MessageField.VALUE)


def test_avro_serde_round_trip_through_dc1_registry(stack: Stack) -> None:
    serializer = AvroSerializer(stack.leader.client(), USER_V1)
    payload = serializer({"id": 1, "name": "ada"}, _ctx())
    stack.payloads.append(payload)
    producer = Producer({"bootstrap.servers": stack.dc1.bootstrap})
    producer.produce(TOPIC, value=payload)
    assert producer.flush(10) == 0
    consumer = Consumer(
        {"bootstrap.servers": stack.dc1.bootstrap, "group.id": "kdr-sr-test", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    try:
        message = eventually(lambda: consumer.poll(1.0), "the produced record")
    finally:
        consumer.close()
    deserializer = AvroDeserializer(stack.leader.client())
    assert deserializer(message.value(), _ctx()) == {"id": 1, "name": "ada"}
    assert stack.leader.client().get_latest_version(SUBJECT).schema_id == int.from_bytes(payload[1:5], "big")


def test_follower_serves_the_same_id(stack: Stack) -> None:
    schema_id = stack.leader.client().register_schema(SUBJECT, Schema(USER_V1, "AVRO"))
    follower = stack.follower.client()
    registered = eventually(lambda: follower.lookup_schema(SUBJECT, Schema(USER_V1, "AVRO")), "follower lookup")
    assert registered.schema_id == schema_id
    assert json.loads(follower.get_schema(schema_id).schema_str) == json.loads(USER_V1)


def test_follower_forwards_writes_to_the_leader(stack: Stack) -> None:
    schema_id = stack.follower.client().register_schema(SUBJECT, Schema(USER_V2, "AVRO"))
    latest = stack.leader.client().get_latest_version(SUBJECT)
    assert (latest.schema_id, latest.version) == (schema_id, 2)
    assert stack.follower.client().set_compatibility(SUBJECT, "FULL") == {"compatibility": "FULL"}
    assert stack.leader.client().get_compatibility(SUBJECT) == "FULL"
    with pytest.raises(SchemaRegistryError) as excinfo:  # forwarded errors are relayed unchanged
        stack.follower.client().register_schema(SUBJECT, Schema(avro({"name": "id", "type": "string"}), "AVRO"))
    assert (excinfo.value.http_status_code, excinfo.value.error_code) == (409, 409)


def test_follower_refuses_writes_without_a_leader(stack: Stack) -> None:
    known_id = stack.follower.client().get_latest_version(SUBJECT).schema_id
    stack.leader.kill()
    client = stack.follower.client()
    with pytest.raises(SchemaRegistryError) as excinfo:
        client.register_schema(SUBJECT, Schema(USER_V3, "AVRO"))
    assert excinfo.value.http_status_code == 500
    assert excinfo.value.error_code in (50003, 50004), excinfo.value  # forwarding fails, then no leader

    def unknown_leader() -> bool:
        try:
            stack.follower.client().register_schema(SUBJECT, Schema(USER_V3, "AVRO"))
        except SchemaRegistryError as exc:
            return exc.error_code == 50004 and exc.error_message.startswith("Leader not known")
        return False

    eventually(unknown_leader, "the follower to report an unknown leader", timeout=20)
    assert stack.follower.leader()["leader"] is None
    assert stack.follower.client().get_schema(known_id).schema_str  # reads still served


def copy_topic(source: str, target: str, topic: str) -> int:
    """Replicate ``topic`` record by record (same key, value, partition 0), as a replicator would."""
    admin = AdminClient({"bootstrap.servers": target})
    futures = admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})])
    try:
        futures[topic].result(10)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    consumer = Consumer(
        {
            "bootstrap.servers": source,
            "group.id": "kdr-sr-copy",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    producer = Producer({"bootstrap.servers": target, "acks": "all"})
    copied = 0
    try:
        while True:
            message = consumer.poll(10.0)
            assert message is not None, f"no end of {topic} reached on {source}"
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                break
            producer.produce(topic, key=message.key(), value=message.value(), partition=0)
            copied += 1
    finally:
        consumer.close()
    assert producer.flush(10) == 0
    return copied


def test_redirected_follower_keeps_old_ids_and_registers_new_ones(stack: Stack) -> None:
    follower = stack.follower
    old_ids = httpx.get(f"{follower.url}/schemas").json()
    old_ids = sorted({entry["id"] for entry in old_ids})
    assert old_ids, "earlier tests registered schemas"
    assert copy_topic(stack.dc1.bootstrap, stack.dc2.bootstrap, "_schemas") > 0

    follower.stop()
    follower.configure(stack.dc2.bootstrap, eligible=True)
    follower.start()
    client = follower.client()
    for schema_id in old_ids:  # at once: a read waits until the store is loaded up to the end it had at the start
        assert client.get_schema(schema_id).schema_str
    eventually(lambda: follower.leader()["is_leader"], "the redirected registry to lead", timeout=20)

    new_id = client.register_schema(SUBJECT, Schema(USER_V4, "AVRO"))
    assert new_id > max(old_ids), (new_id, old_ids, stack.logs())
    assert client.get_latest_version(SUBJECT).version == 3
    assert client.get_compatibility(SUBJECT) == "FULL"  # configs travel with the replicated store
    # A record written before the disaster still decodes through the redirected registry.
    assert AvroDeserializer(client)(stack.payloads[0], _ctx()) == {"id": 1, "name": "ada"}


def test_registry_started_before_its_kafkastore_waits_for_it(tmp_path: Path) -> None:
    broker = ApacheBroker("late-broker", tmp_path / "late-broker")
    registry = RegistryProcess("early-registry", tmp_path, broker.bootstrap, eligible=True)
    try:
        registry.start()  # no broker yet: the HTTP server still answers
        assert httpx.get(f"{registry.url}/subjects").json() == []
        with pytest.raises(SchemaRegistryError) as excinfo:
            registry.client().register_schema(SUBJECT, Schema(USER_V1, "AVRO"))
        assert (excinfo.value.http_status_code, excinfo.value.error_code) == (500, 50004)
        assert broker.bootstrap in excinfo.value.error_message
        broker.start()
        eventually(lambda: registry.leader()["is_leader"], "the registry to reach its store and lead", timeout=30)
        assert registry.client().register_schema(SUBJECT, Schema(USER_V1, "AVRO")) == 1
    finally:
        registry.kill()
        broker.kill()
