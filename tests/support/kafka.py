"""Admin chores the tests repeat against any cluster: create a topic, commit and read a group's offsets."""

from __future__ import annotations

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

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
