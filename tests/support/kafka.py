"""Admin chores the tests repeat against any cluster: create a topic, commit and read a group's offsets, every
partition's high watermark."""

from __future__ import annotations

import time

from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

TIMEOUT_S = 15.0
Offsets = dict[tuple[str, int], int]  # (topic, partition) -> offset


def create_topic(config: dict[str, str], topic: str, partitions: int = 1, **configs: str) -> None:
    admin = AdminClient(config)  # kept referenced until the result: a collected client cancels its requests
    admin.create_topics([NewTopic(topic, partitions, config=configs)])[topic].result(TIMEOUT_S)


def commit_offsets(config: dict[str, str], group: str, offsets: Offsets) -> None:
    admin = AdminClient(config)
    tps = [TopicPartition(topic, partition, offset) for (topic, partition), offset in offsets.items()]
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)])[group].result(TIMEOUT_S)


def committed_offsets(config: dict[str, str], group: str) -> Offsets:
    """The group's committed offsets (partitions without one left out)."""
    admin = AdminClient(config)
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(TIMEOUT_S)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def high_watermarks(config: dict[str, str], ignore: tuple[str, ...] = ()) -> Offsets:
    """Every partition's high watermark but those of the `ignore`d topics: what a step that must change nothing
    leaves as it was (no topic made, nothing written)."""
    admin = AdminClient(config)
    topics = admin.list_topics(timeout=TIMEOUT_S).topics
    tps = [TopicPartition(t, p) for t, meta in topics.items() if t not in ignore for p in meta.partitions]
    futures = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}, request_timeout=TIMEOUT_S)
    return {(tp.topic, tp.partition): future.result(TIMEOUT_S).offset for tp, future in futures.items()}


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
