"""What the tests repeat against any cluster: create a topic, produce records and read them all back, commit and read
a group's offsets, where a group must resume among a topic's copies, every partition's high watermark, a flow's first
copy round."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from kafka_dr.access import ClusterAccess
from kafka_dr.clients import list_group_offsets, offsets_of, read_committed, wait_for_leaders
from kafka_dr.replication.flow_clients import FlowClients
from kafka_dr.replication.rounds import CopyRound, CopyRounds
from kafka_dr.topology import Topology
from kafka_dr.translation.groups import apply_offsets
from kafka_dr_dev.local.registry.election import HEARTBEAT_TOPIC as REGISTRY_HEARTBEATS

from .fleet import ground_truth

TIMEOUT_S = 30.0  # bounds a failure only: a node just started answers slowly on the suite's loaded cores
Offsets = dict[tuple[str, int], int]  # (topic, partition) -> offset


@dataclass(frozen=True)
class Record:
    """One record to produce; `timestamp` is its CreateTime (epoch ms, None: the producer's clock)."""

    value: bytes | None
    key: bytes | None = None
    partition: int = 0
    timestamp: int | None = None
    headers: list[tuple[str, bytes]] | None = None


def produce(
    config: dict[str, Any],
    topic: str,
    records: Iterable[Record],
    transactional_id: str | None = None,
    commit: bool = True,
) -> None:
    """`records` written to `topic`, each acknowledged (the producer waits while its queue is full); with
    `transactional_id`, in one transaction, committed or (`commit=False`) aborted."""
    settings = {**config, "linger.ms": 20, "enable.idempotence": True}
    producer = Producer(settings | ({"transactional.id": transactional_id} if transactional_id else {}))
    if transactional_id:
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
    for record in records:
        while True:
            try:
                producer.produce(
                    topic,
                    key=record.key,
                    value=record.value,
                    partition=record.partition,
                    headers=record.headers,
                    timestamp=record.timestamp or 0,
                )
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(60) == 0  # before an abort too: librdkafka drops unsent records of an aborted transaction
    if transactional_id:
        (producer.commit_transaction if commit else producer.abort_transaction)(TIMEOUT_S)


def read_all(config: dict[str, Any], topic: str, timeout: float = 30.0) -> list[Message]:
    """Every committed data record of every partition of `topic`, each partition's in offset order."""
    ends = {key: end for key, end in high_watermarks(config).items() if key[0] == topic}
    return list(read_committed(config, {key: (0, end) for key, end in sorted(ends.items())}, timeout))


def cluster_id(config: dict[str, Any]) -> str:
    """The cluster id the broker that `config` reaches reports."""
    admin = AdminClient(config)  # kept referenced until the answer: a collected client cancels it
    return admin.describe_cluster(request_timeout=10).result().cluster_id


class ClusterEndpoint:
    """What the tests ask of a one-node cluster by its address (`bootstrap`, given by the subclass): its client
    settings, and its cluster id, asked once (a stop and start keep it; a wipe gives a new object)."""

    _cluster_id: str | None = None

    @property
    def bootstrap(self) -> str:
        raise NotImplementedError

    @property
    def config(self) -> dict[str, str]:
        """confluent-kafka settings that reach this broker."""
        return {"bootstrap.servers": self.bootstrap}

    @property
    def cluster_id(self) -> str:
        if self._cluster_id is None:
            self._cluster_id = cluster_id(self.config)
        return self._cluster_id


def partitions(admin: AdminClient, topic: str) -> int:
    """The topic's partition count as the cluster's metadata shows it now (a moment after CreatePartitions returns,
    an Apache Kafka node may still show the old count)."""
    return len(admin.list_topics(timeout=10).topics[topic].partitions)


def create_topic(config: dict[str, str], topic: str, partitions: int = 1, **configs: str) -> None:
    admin = AdminClient(config)  # kept referenced until the result: a collected client cancels its requests
    admin.create_topics([NewTopic(topic, partitions, config=configs)])[topic].result(TIMEOUT_S)
    # Apache Kafka answers CreateTopics before every broker's metadata has the topic: a test lists it next.
    wait_for_leaders(admin, [topic], TIMEOUT_S)


def commit_offsets(config: dict[str, str], group: str, offsets: Offsets) -> None:
    """Commit a group's offsets as the translation applies them (every partition's answer checked, a loading
    coordinator asked again); a commit not made fails the test."""
    tps = [TopicPartition(topic, partition, offset) for (topic, partition), offset in offsets.items()]
    (applied,) = apply_offsets(AdminClient(config), {group: tps}, TIMEOUT_S)
    assert applied.applied, f"group {group}: {applied.reason}"


def committed_offsets(config: dict[str, str], group: str) -> Offsets:
    """The group's committed offsets (partitions without one left out)."""
    admin = AdminClient(config)
    result = list_group_offsets(admin, [ConsumerGroupTopicPartitions(group)], TIMEOUT_S)[group].result(TIMEOUT_S)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def resume_offsets(config: dict[str, Any], topic: str, committed: dict[int, int]) -> Offsets:
    """Where a group that committed `committed` (partition -> offset in the source) must resume in this cluster's
    `topic`, read from the copies' provenance headers (fleet.GroundTruth). Copies sit at no fixed distance from their
    source offsets: every committed copy transaction leaves a marker that takes an offset."""
    truth = ground_truth(config, topic, max(committed) + 1, None)
    return {(topic, partition): truth.resume_at(partition, offset) for partition, offset in committed.items()}


def high_watermarks(config: dict[str, str], ignore: tuple[str, ...] = ()) -> Offsets:
    """Every partition's high watermark but those of the `ignore`d topics and of the registries' leader heartbeats
    (a stack's registry writes one a second into its store's cluster): what a step that must change nothing leaves
    as it was (no topic made, nothing written)."""
    admin = AdminClient(config)
    topics = admin.list_topics(timeout=TIMEOUT_S).topics
    skipped = (*ignore, REGISTRY_HEARTBEATS)
    partitions = [(t, p) for t, meta in topics.items() if t not in skipped for p in meta.partitions]
    return offsets_of(admin, partitions, OffsetSpec.latest(), timeout=TIMEOUT_S)


HOUR_MS = 3_600_000


def hourly_records(config: dict[str, str], topic: str, per_hour: int, hours: int = 3, ending_ago: int = 1) -> int:
    """`hours` hours of records ending at least `ending_ago` hours ago, `per_hour` each (values h<hour>-<i>, a second
    apart, spread over 2 partitions); returns the first hour's start (epoch ms, on the hour)."""
    first = (int(time.time() * 1000) // HOUR_MS - hours - ending_ago) * HOUR_MS
    producer = Producer({**config, "linger.ms": 20, "enable.idempotence": True})
    for hour in range(hours):
        for i in range(per_hour):
            value = f"h{hour + 1}-{i}".encode()
            producer.produce(topic, value=value, partition=i % 2, timestamp=first + hour * HOUR_MS + i * 1000)
    assert producer.flush(30) == 0
    return first


def iso(ms: int) -> str:
    """An ISO-8601 UTC time of epoch milliseconds (second precision)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(ms / 1000))


def first_round(topology: Topology, flow: str) -> CopyRound:
    """The flow's copy round as a replicator's start decides it (the target's internal topics made first)."""
    with FlowClients(ClusterAccess.from_environ(topology), topology.flow(flow)) as clients:
        rounds = CopyRounds(clients)
        rounds.prepare_target()
        return rounds.next()
