"""Admin chores the tests repeat against any cluster: create a topic, commit and read a group's offsets, every
partition's high watermark."""

from __future__ import annotations

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
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
