"""The drill's probe application: a producer and a consumer group that follow their client aliases across a DR switch.

`dr_drill` runs it (probe_process.py) on its probe topic. Both clients are kafka_dr.follower's: they ask
`client_switch` where their alias points and reconnect when it moves, as an application of a kafka-dr deployment
would. Every record carries the run id and a sequence number, so the consumer, not an assumption, tells how many
records were lost or read twice, and the producer's own counts say how many sends were acknowledged, refused or left
waiting. Records are Avro through the schema registry of the cluster the alias points at when the topology gives that
cluster one (so a drill also proves the registry redirect), else JSON.
- the producer is FollowingProducer: it produces again what its old cluster never acknowledged (idempotent
  producer, 10 s delivery timeout), on the cluster its alias points at;
- the consumer is kafka_dr.follower's FollowingConsumer: it resumes at the offsets the DAGs translated and drops,
  by provenance, the records it reads again there (counted apart: `dropped`), so each record reaches the
  application once.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from confluent_kafka import KafkaError
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext, SerializationError

from ..access import ClusterAccess
from ..follower import FollowingConsumer, FollowingProducer
from ..schema_registry import client_settings
from ..topology import Topology

GROUP = "kdr-drill-probe"
REGISTRY_RETRY_S = 0.2
SCHEMA = """{"type": "record", "name": "Probe", "namespace": "kafka_dr.drill", "fields": [
  {"name": "run", "type": "string"}, {"name": "seq", "type": "long"}, {"name": "amount", "type": "double"}]}"""


@dataclass
class Tally:
    """What the application saw; read by the drill while the threads run (counters only grow)."""

    sent: int = 0  # records handed to the producer
    acknowledged: set[int] = field(default_factory=set)
    refused: set[int] = field(default_factory=set)  # a delivery error no retry mends
    unacknowledged: int = 0  # what the producer's last flush left waiting
    consumed: list[int] = field(default_factory=list)  # every record counted, in order: repeats are duplicates
    resent: int = 0
    dropped: int = 0  # records the consumer read again after a switch and did not deliver (kafka_dr.follower)
    moves: list[str] = field(default_factory=list)  # "producer -> dc2 at ..." lines
    registry_retries: int = 0  # serializations retried: a registry not yet leading after a switch refused them
    errors: list[str] = field(default_factory=list)  # a client thread that died, and why: the drill cannot pass

    @property
    def lost(self) -> int:
        """Records a cluster acknowledged that the consumer never got."""
        return len(self.acknowledged - set(self.consumed))

    @property
    def duplicated(self) -> int:
        """Records delivered to the application more than once, after the follower's de-duplication."""
        return len(self.consumed) - len(set(self.consumed))

    @property
    def read_twice(self) -> int:
        """Records read from Kafka more than once, before the follower's de-duplication."""
        return self.dropped + self.duplicated


class ProbeApplication:
    """Produces `rate` records a second to `topic` through `producer_alias` and consumes them as `group` (by default
    one of its own run) through `consumer_alias`, until `stop_producing` and `stop`."""

    def __init__(
        self,
        topology: Topology,
        topic: str,
        producer_alias: str,
        consumer_alias: str,
        rate: float = 20.0,
        group: str | None = None,
        log: Callable[[str], None] = print,
        client_log: logging.Logger | None = None,
    ) -> None:
        self.topology = topology
        self.access = ClusterAccess.from_environ(topology)  # the probe is an application: its environment, read once
        self.topic = topic
        self.producer_alias = producer_alias
        self.consumer_alias = consumer_alias
        self.rate = rate
        self.log = log
        # librdkafka's own messages (a dead cluster's refused connections, several a second) go here, not to stderr.
        self.client_log = client_log or logging.getLogger("kafka_dr.drill.clients")
        self.run = uuid.uuid4().hex[:8]
        self.group = group or f"{GROUP}-{self.run}"  # a group of its own: its checkpoint is this run's
        self.tally = Tally()
        self._producing = threading.Event()
        self._running = threading.Event()
        self._consuming = threading.Event()  # cleared: the consumer is held back and falls behind
        self._consuming.set()
        self._assigned = threading.Event()
        self._threads = [
            threading.Thread(target=self._consume, name="probe-consumer", daemon=True),
            threading.Thread(target=self._produce, name="probe-producer", daemon=True),
        ]

    def start(self, timeout: float = 60.0) -> None:
        """Start the consumer, wait until it has its partitions, then the producer."""
        self._running.set()
        self._producing.set()
        self._threads[0].start()
        if not self._assigned.wait(timeout):
            raise RuntimeError(f"the probe's consumer got no partition of {self.topic} within {timeout:.0f} s")
        self._threads[1].start()

    def hold_consumer(self) -> None:
        """The consumer stops reading (a slow application): records it has not read pile up in the cluster."""
        self._consuming.clear()

    def release_consumer(self) -> None:
        self._consuming.set()

    def wait_consumed(self, numbers: set[int], timeout: float) -> bool:
        """Wait until the consumer got every record of `numbers`; False when `timeout` passed first."""
        deadline = time.monotonic() + timeout
        while not numbers <= set(self.tally.consumed) and time.monotonic() < deadline:
            time.sleep(0.5)
        return numbers <= set(self.tally.consumed)

    def stop_producing(self) -> None:
        self._producing.clear()
        self._threads[1].join(30)

    def drain(self, timeout: float) -> bool:
        """Wait until every acknowledged record was consumed; False when `timeout` passed first."""
        return self.wait_consumed(self.tally.acknowledged, timeout)  # the live set: what is acknowledged meanwhile too

    def stop(self) -> None:
        self._producing.clear()
        self._running.clear()
        for thread in self._threads:
            if thread.is_alive():
                thread.join(30)

    # --- producer -------------------------------------------------------------------------------

    def _serializer(self, cluster: str) -> Callable[[dict[str, Any], SerializationContext], bytes | None]:
        if self.topology.cluster(cluster).schema_registry is None:
            return lambda record, _: json.dumps(record).encode()
        return AvroSerializer(SchemaRegistryClient(client_settings(self.access, cluster)), SCHEMA)

    def _deserializer(self, cluster: str) -> Callable[[bytes | None, SerializationContext], Any]:
        if self.topology.cluster(cluster).schema_registry is None:
            return lambda value, _: json.loads(value or b"null")
        return AvroDeserializer(SchemaRegistryClient(client_settings(self.access, cluster)))

    def _produce(self) -> None:
        self._guarded("producer", self._produce_until_stopped)

    def _guarded(self, role: str, work: Callable[[], None]) -> None:
        """Run a client thread's loop; an error that ends it is kept in the tally (the drill's evidence) and logged."""
        try:
            work()
        except Exception as exc:  # noqa: BLE001 - whatever ends the thread, the drill must say it
            self.tally.errors.append(f"{role}: {type(exc).__name__}: {exc}")
            self.log(f"probe {role} stopped by an error: {type(exc).__name__}: {exc}")

    def _produce_until_stopped(self) -> None:
        producer = FollowingProducer(
            self.topology,
            self.producer_alias,
            {"message.timeout.ms": 10_000, "linger.ms": 5, "logger": self.client_log},
            on_move=lambda before, now: self._moved("producer", now, before),
        )
        serializers: dict[str, Callable[[dict[str, Any], SerializationContext], bytes | None]] = {}
        context = SerializationContext(self.topic, MessageField.VALUE)
        seq = 0
        while self._producing.is_set():
            producer.poll(0)  # follows the alias
            cluster = producer.cluster
            assert cluster is not None
            if cluster not in serializers:
                serializers[cluster] = self._serializer(cluster)
            try:
                value = serializers[cluster]({"run": self.run, "seq": seq, "amount": seq * 1.5}, context)
            except (SchemaRegistryError, httpx.TransportError) as exc:
                # Clients switch beside the registry redirect: until the target's registry leads (or while it
                # restarts), registering the schema there fails. An application retries, as the probe does.
                if not self.tally.registry_retries:
                    self.log(f"probe producer: schema registry of {cluster} refused: {exc}; retrying")
                self.tally.registry_retries += 1
                time.sleep(REGISTRY_RETRY_S)
                continue
            producer.produce(self.topic, key=str(seq).encode(), value=value, on_delivery=self._delivered(seq))
            seq += 1
            self.tally.sent = seq
            deadline = time.monotonic() + 1 / self.rate
            while time.monotonic() < deadline:
                producer.poll(max(deadline - time.monotonic(), 0))
            self.tally.resent = producer.resent
        self.tally.unacknowledged = producer.flush(15)
        self.tally.resent = producer.resent

    def _delivered(self, number: int) -> Callable[[KafkaError | None, Any], None]:
        def delivered(err: KafkaError | None, _: Any) -> None:
            if err is None:  # FollowingProducer produces again what a cluster did not acknowledge
                self.tally.acknowledged.add(number)
            else:
                self.tally.refused.add(number)
                self.log(f"probe producer: record {number} refused: {err.str()}")

        return delivered

    # --- consumer -------------------------------------------------------------------------------

    def _consume(self) -> None:
        self._guarded("consumer", self._consume_until_stopped)

    def _consume_until_stopped(self) -> None:
        context = SerializationContext(self.topic, MessageField.VALUE)
        deserializers: dict[str, Callable[[bytes | None, SerializationContext], Any]] = {}
        consumer = FollowingConsumer(
            self.topology,
            self.consumer_alias,
            [self.topic],
            {
                "group.id": self.group,
                "auto.offset.reset": "earliest",  # a new group: other runs' records are skipped
                "isolation.level": "read_committed",
                "logger": self.client_log,
            },
            on_move=lambda before, now: self._moved("consumer", now, before),
            on_assign=self._assigned.set,
        )
        try:
            while self._running.is_set():
                if not self._consuming.wait(0.5):
                    continue
                message = consumer.poll(0.5)
                self.tally.dropped = consumer.dropped
                if message is None or message.error() is not None:
                    continue
                assert consumer.cluster is not None
                if consumer.cluster not in deserializers:
                    deserializers[consumer.cluster] = self._deserializer(consumer.cluster)
                try:
                    record = deserializers[consumer.cluster](message.value(), context)
                except (SerializationError, ValueError):
                    continue  # not one of this probe's records (the topic is shared)
                if isinstance(record, dict) and record.get("run") == self.run:
                    self.tally.consumed.append(record["seq"])
        finally:
            consumer.close()

    def _moved(self, role: str, cluster: str, before: str | None) -> None:
        line = f"probe {role} {'connects to' if before is None else f'moves {before} ->'} {cluster}"
        self.tally.moves.append(line)
        self.log(line)
