"""Topics, partitions and configs of one embedded cluster.

Topic metadata (id, partition count, config overrides) lives in `topics.json`, written atomically;
the partitions' data is in `<topic>-<partition>/` directories next to it, as in a Kafka log dir.
"""

from __future__ import annotations

import json
import re
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import kafka.errors as Errors

from kafka_dr.processes import write_atomic

from .log import PartitionLog

METADATA_FILE = "topics.json"
LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")

# DescribeConfigs config_type codes.
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 1, 2, 3, 5, 6, 7

# Apache Kafka's topic configs with their defaults (broker defaults of a stock install).
TOPIC_CONFIGS: dict[str, tuple[str, int]] = {
    "cleanup.policy": ("delete", LIST),
    "compression.type": ("producer", STRING),
    "delete.retention.ms": ("86400000", LONG),
    "file.delete.delay.ms": ("60000", LONG),
    "flush.messages": ("9223372036854775807", LONG),
    "flush.ms": ("9223372036854775807", LONG),
    "follower.replication.throttled.replicas": ("", LIST),
    "index.interval.bytes": ("4096", INT),
    "leader.replication.throttled.replicas": ("", LIST),
    "local.retention.bytes": ("-2", LONG),
    "local.retention.ms": ("-2", LONG),
    "max.compaction.lag.ms": ("9223372036854775807", LONG),
    "max.message.bytes": ("1048588", INT),
    "message.timestamp.after.max.ms": ("3600000", LONG),
    "message.timestamp.before.max.ms": ("9223372036854775807", LONG),
    "message.timestamp.type": ("CreateTime", STRING),
    "min.cleanable.dirty.ratio": ("0.5", DOUBLE),
    "min.compaction.lag.ms": ("0", LONG),
    "min.insync.replicas": ("1", INT),
    "preallocate": ("false", BOOLEAN),
    "remote.storage.enable": ("false", BOOLEAN),
    "retention.bytes": ("-1", LONG),
    "retention.ms": ("604800000", LONG),
    "segment.bytes": ("1073741824", INT),
    "segment.index.bytes": ("10485760", INT),
    "segment.jitter.ms": ("0", LONG),
    "segment.ms": ("604800000", LONG),
    "unclean.leader.election.enable": ("false", BOOLEAN),
}
ENUMS = {
    "cleanup.policy": {"delete", "compact"},
    "compression.type": {"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"},
    "message.timestamp.type": {"CreateTime", "LogAppendTime"},
}


def validate_config(name: str, value: str | None) -> None:
    """Refuse what Kafka refuses: unknown names, values of the wrong type or outside an enum."""
    if name not in TOPIC_CONFIGS:
        raise Errors.InvalidConfigurationError(f"Unknown topic config name: {name}")
    if value is None:
        raise Errors.InvalidConfigurationError(f"Null value not supported for topic config: {name}")
    kind = TOPIC_CONFIGS[name][1]
    try:
        if kind in (INT, LONG):
            int(value)
        elif kind == DOUBLE:
            float(value)
        elif kind == BOOLEAN and value.lower() not in ("true", "false"):
            raise ValueError
    except ValueError:
        raise Errors.InvalidConfigurationError(f"Invalid value {value} for configuration {name}") from None
    allowed = ENUMS.get(name)
    if allowed:
        items = [v.strip() for v in value.split(",")] if kind == LIST else [value]
        bad = [v for v in items if v not in allowed]
        if bad:
            raise Errors.InvalidConfigurationError(
                f"Invalid value {value} for configuration {name}: must be one of {sorted(allowed)}"
            )


def validate_topic_name(name: str) -> None:
    if name in (".", "..") or not LEGAL_TOPIC.fullmatch(name or ""):
        raise Errors.InvalidTopicError(
            f"Topic name '{name}' is illegal: use up to 249 of [a-zA-Z0-9._-], not '.' or '..'"
        )


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    configs: dict[str, str] = field(default_factory=dict)  # overrides only
    partitions: list[PartitionLog] = field(default_factory=list)

    def config(self, name: str) -> str:
        return self.configs.get(name, TOPIC_CONFIGS[name][0])


class TopicStore:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.topics: dict[str, Topic] = {}
        self.by_id: dict[uuid.UUID, Topic] = {}
        self._load()

    def _load(self) -> None:
        path = self.data_dir / METADATA_FILE
        if not path.exists():
            return
        for name, meta in json.loads(path.read_text()).items():
            topic = Topic(name, uuid.UUID(meta["id"]), dict(meta["configs"]))
            for p in range(meta["partitions"]):
                topic.partitions.append(self._open_partition(topic, p))
            self._register(topic)

    def _save(self) -> None:
        meta = {
            t.name: {"id": str(t.topic_id), "partitions": len(t.partitions), "configs": t.configs}
            for t in self.topics.values()
        }
        write_atomic(self.data_dir / METADATA_FILE, json.dumps(meta, indent=1, sort_keys=True))

    def _register(self, topic: Topic) -> None:
        self.topics[topic.name] = topic
        self.by_id[topic.topic_id] = topic

    def _open_partition(self, topic: Topic, index: int) -> PartitionLog:
        return PartitionLog(self.data_dir / f"{topic.name}-{index}", topic.config)

    def get(self, name: str) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            raise Errors.UnknownTopicOrPartitionError(f"This server does not host topic {name}")
        return topic

    def partition(self, name: str, index: int) -> PartitionLog:
        topic = self.get(name)
        if not 0 <= index < len(topic.partitions):
            raise Errors.UnknownTopicOrPartitionError(f"This server does not host {name}-{index}")
        return topic.partitions[index]

    def check_create(self, name: str, partitions: int, configs: dict[str, str]) -> None:
        """Everything CreateTopics validates, without changing anything (validate_only)."""
        validate_topic_name(name)
        if name in self.topics:
            raise Errors.TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        if partitions < 1:
            raise Errors.InvalidPartitionsError("Number of partitions must be larger than 0.")
        for key, value in configs.items():
            validate_config(key, value)

    def create(self, name: str, partitions: int, configs: dict[str, str]) -> Topic:
        self.check_create(name, partitions, configs)
        topic = Topic(name, uuid.uuid4(), dict(configs))
        topic.partitions = [self._open_partition(topic, p) for p in range(partitions)]
        self._register(topic)
        self._save()
        return topic

    def delete(self, name: str) -> None:
        topic = self.get(name)
        for partition in topic.partitions:
            partition.close()
            shutil.rmtree(partition.directory, ignore_errors=True)
        del self.topics[name]
        del self.by_id[topic.topic_id]
        self._save()

    def add_partitions(self, name: str, total: int, validate_only: bool = False) -> None:
        topic = self.get(name)
        if total <= len(topic.partitions):
            raise Errors.InvalidPartitionsError(
                f"Topic currently has {len(topic.partitions)} partitions, which is higher than or "
                f"equal to the requested {total}."
            )
        if validate_only:
            return
        topic.partitions += [self._open_partition(topic, p) for p in range(len(topic.partitions), total)]
        self._save()

    def set_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace the topic's overrides with configs (after validating them all)."""
        topic = self.get(name)
        for key, value in configs.items():
            validate_config(key, value)
        topic.configs = dict(configs)
        self._save()

    def close(self) -> None:
        for topic in self.topics.values():
            for partition in topic.partitions:
                partition.close()
