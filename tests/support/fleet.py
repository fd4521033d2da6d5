"""Many consumer groups over a multi-partition topic, for the tests and benchmarks at scale: records in every
partition, groups committed at random offsets, and the ground truth of where each group must resume in a
destination, read from the destination's provenance headers (never from kafka-dr's own translation)."""

from __future__ import annotations

import bisect
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from kafka_dr.replication.provenance import hops

GroupOffsets = dict[str, dict[int, int]]
"""group -> partition -> offset"""


def fill(config: dict[str, str], topic: str, partitions: int, count: int, tag: str) -> None:
    """`count` records into every partition of `topic`, valued `<tag>-<i>`."""
    producer = Producer({**config, "linger.ms": 20, "batch.size": 1_000_000})
    for p in range(partitions):
        for i in range(count):
            while True:
                try:
                    producer.produce(topic, f"{tag}-{i}".encode(), partition=p)
                    break
                except BufferError:
                    producer.poll(0.05)
    assert producer.flush(120) == 0


def commit_random_groups(
    config: dict[str, str], topic: str, partitions: int, groups: int, below: int, prefix: str, seed: int = 42
) -> GroupOffsets:
    """Commit `groups` groups named `<prefix>-NNNN`, each at its own random offset (0..below) in every partition;
    every commit is in flight at once. Returns what was committed."""
    rng = random.Random(seed)
    admin = AdminClient(config)
    commits: GroupOffsets = {}
    futures = []
    for g in range(groups):
        group = f"{prefix}-{g:04d}"
        commits[group] = {p: rng.randrange(below + 1) for p in range(partitions)}
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p, o) for p, o in commits[group].items()])
        futures.append(admin.alter_consumer_group_offsets([request])[group])
    for future in futures:
        future.result(60)
    return commits


@dataclass(frozen=True)
class GroundTruth:
    """Where copies of one source sit in a destination topic, read record by record."""

    copies: dict[int, list[tuple[int, int]]]  # partition -> (origin offset, destination offset), in log order
    after_last: dict[int, int]  # partition -> the offset after its last copy
    read_seconds: float  # one plain read of every destination partition

    def resume_at(self, partition: int, committed: int) -> int:
        """Where a group that committed `committed` in the source must resume: the first copy of an origin
        offset at or after it (copies are in source order), else after the last copy."""
        copies = self.copies.get(partition, [])
        i = bisect.bisect_left(copies, (committed, -1))
        return copies[i][1] if i < len(copies) else self.after_last.get(partition, 0)

    def score(self, commits: GroupOffsets, resumed: Mapping[str, Mapping[int, int]]) -> tuple[int, int]:
        """Groups with every partition where it must resume, and exact group-partitions, in `resumed`."""
        exact_groups = exact_partitions = 0
        for group, offsets in commits.items():
            got = resumed.get(group, {})
            ok = sum(got.get(p) == self.resume_at(p, committed) for p, committed in offsets.items())
            exact_partitions += ok
            exact_groups += ok == len(offsets)
        return exact_groups, exact_partitions


def ground_truth(config: dict[str, str], topic: str, partitions: int, source_cluster_id: str | None) -> GroundTruth:
    """Read every destination partition once and note each copy of `source_cluster_id`'s records (None: of any
    cluster's)."""
    consumer = Consumer({**config, "group.id": "truth", "enable.partition.eof": True, "fetch.wait.max.ms": 10})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    copies: dict[int, list[tuple[int, int]]] = {}
    after: dict[int, int] = {}
    done: set[int] = set()
    started = time.perf_counter()
    while len(done) < partitions:
        for m in consumer.consume(10_000, timeout=1):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    done.add(m.partition())
                continue
            chain = hops(m.headers())
            if chain and source_cluster_id in (None, chain[-1].cluster_id):
                copies.setdefault(m.partition(), []).append((chain[-1].offset, m.offset()))
                after[m.partition()] = m.offset() + 1
    seconds = time.perf_counter() - started
    consumer.close()
    return GroundTruth(copies, after, seconds)
