"""One small adapter API, implemented twice: with confluent-kafka (librdkafka) and with kafka-python.

The conformance tests speak only to this API so that every check runs against the broker through
two independent Kafka client implementations.  Both adapters return plain Python values (ints,
bytes, tuples, the dataclasses below) so results can be compared across clients.
"""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

CLIENT_NAMES = ("confluent", "kafka-python")

# Timestamp types, normalised (the two libraries number them differently).
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
NO_TIMESTAMP = "NoTimestampType"


class OffsetOutOfRange(Exception):
    """A fetch position is outside [log start offset, high watermark] and no auto reset was allowed."""


class ProduceError(Exception):
    """Some records were not delivered; ``errors`` holds one message per failed record."""

    def __init__(self, errors: list[str]):
        super().__init__(f"{len(errors)} records failed, first: {errors[:3]}")
        self.errors = errors


@dataclass(frozen=True)
class Record:
    """A record to produce.  ``partition=None`` lets the client's partitioner pick."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp_ms: int | None = None
    partition: int | None = None


@dataclass(frozen=True)
class Consumed:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int
    timestamp_type: str

    def content(self) -> tuple:
        """What a producer controls: compare this against the produced Record."""
        return (self.key, self.value, self.headers, self.timestamp_ms)


@dataclass(frozen=True)
class ConfigValue:
    name: str
    value: str | None
    source: str  # ConfigSource name, e.g. DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG, STATIC_BROKER_CONFIG
    is_default: bool
    read_only: bool


def unique(prefix: str = "conf") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def wait_until(predicate, timeout: float, interval: float = 0.05, message: str = "condition"):
    """Poll ``predicate`` until it returns a truthy value; return that value or raise AssertionError."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            result = predicate()
            if result:
                return result
            last = result
        except Exception as exc:  # noqa: BLE001 - retried until the deadline
            last = exc
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}; last outcome: {last!r}")
        time.sleep(interval)


def wait_for_value(fn, expected, timeout: float, message: str = "value", interval: float = 0.05):
    """Poll ``fn()`` until it returns ``expected``; on timeout fail showing the last value seen."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            last = fn()
        except Exception as exc:  # noqa: BLE001 - retried until the deadline
            last = exc
        if last == expected:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"{message}: expected {expected!r}, still {last!r} after {timeout}s")
        time.sleep(interval)


def _source_name(name: str) -> str:
    # confluent: UNKNOWN_CONFIG / GROUP_CONFIG; kafka-python: UNKNOWN / DYNAMIC_GROUP_CONFIG
    return {"UNKNOWN_CONFIG": "UNKNOWN", "GROUP_CONFIG": "DYNAMIC_GROUP_CONFIG"}.get(name, name)


class ClientAdapter:
    """The API every test uses.  See the two implementations below."""

    name: str
    supports_null_header_values: bool = True
    supports_null_key_and_value: bool = True

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap

    # -- topics -------------------------------------------------------------------------------------
    def create_topic(
        self, name: str, partitions: int = 1, configs: dict[str, str] | None = None, replication_factor: int = 1
    ) -> None:
        raise NotImplementedError

    def partition_count(self, topic: str) -> int:
        raise NotImplementedError

    def create_partitions(self, topic: str, total: int) -> None:
        raise NotImplementedError

    def describe_configs(self, topic: str) -> dict[str, ConfigValue]:
        raise NotImplementedError

    def alter_config(self, topic: str, key: str, value: str) -> None:
        raise NotImplementedError

    def delete_records(self, topic: str, partition: int, before_offset: int) -> int:
        """Delete records before ``before_offset`` (-1: the high watermark); return the new low watermark."""
        raise NotImplementedError

    def cluster_id(self) -> str:
        raise NotImplementedError

    def delete_topic(self, name: str) -> None:
        raise NotImplementedError

    def list_groups(self) -> set[str]:
        raise NotImplementedError

    def delete_group(self, group: str) -> None:
        raise NotImplementedError

    def brokers(self) -> dict[int, tuple[str, int]]:
        """{node_id: (host, port)} from a Metadata request."""
        raise NotImplementedError

    def wait_for_partitions(self, topic: str, count: int, timeout: float = 15.0) -> None:
        wait_until(
            lambda: self.partition_count(topic) == count,
            timeout,
            message=f"{topic} to have {count} partitions with leaders",
        )

    # -- produce ------------------------------------------------------------------------------------
    def produce(
        self,
        topic: str,
        records: Sequence[Record],
        *,
        compression: str | None = None,
        batch_records: int | None = None,
        idempotent: bool = False,
        linger_ms: int = 1000,
    ) -> list[tuple[int, int]]:
        """Produce ``records`` in order; return the (partition, offset) of each one, in order.

        With ``batch_records=N`` the client lingers (``linger_ms``) and is flushed after every N
        records, so each group of N records travels as one batch per partition.
        """
        raise NotImplementedError

    # -- offsets ------------------------------------------------------------------------------------
    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        raise NotImplementedError

    def high_watermark(self, topic: str, partition: int) -> int:
        return self.watermarks(topic, partition)[1]

    def low_watermark(self, topic: str, partition: int) -> int:
        return self.watermarks(topic, partition)[0]

    def offsets_for_times(self, topic: str, partition: int, timestamp_ms: int) -> int:
        """Consumer API: earliest offset whose timestamp >= ``timestamp_ms``, or -1 if there is none."""
        raise NotImplementedError

    def list_offsets(
        self, topic: str, partition: int, spec: str | int, isolation_level: str = "read_uncommitted"
    ) -> int:
        """Admin ListOffsets: ``spec`` is "earliest" (-2), "latest" (-1) or a timestamp (>= 0).

        Returns the offset (-1 when no record has a timestamp >= the given one).
        """
        raise NotImplementedError

    # -- consume ------------------------------------------------------------------------------------
    def consume(
        self,
        topic: str,
        partition: int,
        from_offset: int,
        count: int | None,
        *,
        isolation_level: str = "read_uncommitted",
        reset: str = "earliest",
        timeout: float = 30.0,
    ) -> list[Consumed]:
        """Assign one partition at ``from_offset`` and read ``count`` records.

        ``count=None`` reads until the end of the partition (high watermark, or the last stable
        offset under read_committed).  ``reset`` is what happens on an out-of-range position:
        "earliest", "latest", or "none" (raise OffsetOutOfRange).
        """
        return self._consume(topic, partition, from_offset, count, isolation_level, reset, timeout)

    def _consume(self, topic, partition, from_offset, count, isolation_level, reset, timeout) -> list[Consumed]:
        raise NotImplementedError

    # -- groups -------------------------------------------------------------------------------------
    def commit(self, group: str, offsets: dict[tuple[str, int], int], metadata: str = "") -> None:
        raise NotImplementedError

    def committed(self, group: str, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int | None]:
        raise NotImplementedError

    def group_member(self, group: str, topic: str, *, session_timeout_ms: int = 6000) -> GroupMember:
        raise NotImplementedError

    def group_offsets(self, group: str) -> dict[tuple[str, int], tuple[int, str]]:
        """All committed offsets of a group (OffsetFetch for all partitions): {(topic, p): (offset, metadata)}."""
        raise NotImplementedError

    def describe_group(self, group: str) -> tuple[str, int]:
        """(state in upper case, e.g. "STABLE" / "EMPTY", number of members)."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class GroupMember:
    """A subscribed consumer whose poll loop runs in its own thread; tracks its assignment."""

    def __init__(self):
        self._lock = threading.Lock()
        self._assignment: frozenset[tuple[str, int]] = frozenset()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.errors: list[str] = []

    def start(self) -> GroupMember:
        self._thread.start()
        return self

    @property
    def assignment(self) -> frozenset[tuple[str, int]]:
        with self._lock:
            return self._assignment

    def _set_assignment(self, tps: Iterable[tuple[str, int]]) -> None:
        with self._lock:
            self._assignment = frozenset(tps)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._poll_once()
        except Exception as exc:  # noqa: BLE001 - surfaced through .errors
            self.errors.append(repr(exc))
        finally:
            self._close_consumer()

    def close(self, timeout: float = 30.0) -> None:
        """Stop polling and close the consumer (a clean LeaveGroup)."""
        self._stop.set()
        self._thread.join(timeout)

    def _poll_once(self) -> None:
        raise NotImplementedError

    def _close_consumer(self) -> None:
        raise NotImplementedError


# ================================================================================================
# confluent-kafka (librdkafka)
# ================================================================================================


class ConfluentClient(ClientAdapter):
    name = "confluent"

    def __init__(self, bootstrap: str):
        super().__init__(bootstrap)
        from confluent_kafka.admin import AdminClient

        # A producer-type handle would auto-create topics from metadata lookups: not for an admin.
        self._admin = AdminClient({"bootstrap.servers": bootstrap, "allow.auto.create.topics": False})
        self._helper = None

    def _base(self) -> dict:
        return {"bootstrap.servers": self.bootstrap}

    def _consumer_conf(self, group: str | None = None, **extra) -> dict:
        conf = self._base()
        conf.update(
            {
                "group.id": group or unique("conf-helper"),
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "fetch.wait.max.ms": 100,
                "topic.metadata.refresh.interval.ms": 1000,
                "isolation.level": "read_uncommitted",  # librdkafka defaults to read_committed
            }
        )
        conf.update(extra)
        return conf

    def _helper_consumer(self):
        from confluent_kafka import Consumer

        if self._helper is None:
            self._helper = Consumer(self._consumer_conf())
        return self._helper

    @staticmethod
    def _result(futures: dict, timeout: float = 30.0) -> list:
        return [f.result(timeout=timeout) for f in futures.values()]

    # -- topics -------------------------------------------------------------------------------------
    def create_topic(self, name, partitions=1, configs=None, replication_factor=1):
        from confluent_kafka.admin import NewTopic

        topic = NewTopic(
            name, num_partitions=partitions, replication_factor=replication_factor, config=dict(configs or {})
        )
        self._result(self._admin.create_topics([topic], operation_timeout=30))
        self.wait_for_partitions(name, partitions)

    def partition_count(self, topic):
        md = self._admin.list_topics(topic=topic, timeout=10)
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            return -1
        if any(p.leader < 0 or p.error is not None for p in t.partitions.values()):
            return -1
        return len(t.partitions)

    def create_partitions(self, topic, total):
        from confluent_kafka.admin import NewPartitions

        self._result(self._admin.create_partitions([NewPartitions(topic, total)], operation_timeout=30))
        self.wait_for_partitions(topic, total)

    def describe_configs(self, topic):
        from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

        [entries] = self._result(self._admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]))
        return {
            name: ConfigValue(
                name=name,
                value=e.value,
                source=_source_name(ConfigSource(e.source).name),
                is_default=bool(e.is_default),
                read_only=bool(e.is_read_only),
            )
            for name, e in entries.items()
        }

    def alter_config(self, topic, key, value):
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

        resource = ConfigResource(
            ResourceType.TOPIC,
            topic,
            incremental_configs=[ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)],
        )
        self._result(self._admin.incremental_alter_configs([resource]))

    def delete_records(self, topic, partition, before_offset):
        from confluent_kafka import TopicPartition

        [deleted] = self._result(
            self._admin.delete_records([TopicPartition(topic, partition, before_offset)], operation_timeout=30)
        )
        return deleted.low_watermark

    def cluster_id(self):
        return self._admin.describe_cluster(request_timeout=10).result(timeout=15).cluster_id

    def delete_topic(self, name):
        self._result(self._admin.delete_topics([name], operation_timeout=30))

    def list_groups(self):
        result = self._admin.list_consumer_groups(request_timeout=10).result(timeout=15)
        if result.errors:
            raise RuntimeError(f"list_consumer_groups: {result.errors}")
        return {g.group_id for g in result.valid}

    def delete_group(self, group):
        self._result(self._admin.delete_consumer_groups([group], request_timeout=15))

    def brokers(self):
        md = self._admin.list_topics(timeout=10)
        return {b.id: (b.host, b.port) for b in md.brokers.values()}

    # -- produce ------------------------------------------------------------------------------------
    def produce(self, topic, records, *, compression=None, batch_records=None, idempotent=False, linger_ms=1000):
        from confluent_kafka import Producer

        conf = self._base()
        conf.update(
            {
                "acks": "all",
                "linger.ms": linger_ms if batch_records else 5,
                "batch.num.messages": 100000,
                "batch.size": 1000000,
                "compression.type": compression or "none",
                "enable.idempotence": idempotent,
                "message.timeout.ms": 30000,
            }
        )
        producer = Producer(conf)
        results: list[tuple[int, int] | None] = [None] * len(records)
        errors: list[str] = []

        def delivery(index):
            def cb(err, msg):
                if err is not None:
                    errors.append(f"record {index}: {err}")
                else:
                    results[index] = (msg.partition(), msg.offset())

            return cb

        for i, r in enumerate(records):
            kwargs = {"key": r.key, "value": r.value, "on_delivery": delivery(i)}
            if r.headers:
                kwargs["headers"] = list(r.headers)
            if r.timestamp_ms is not None:
                kwargs["timestamp"] = r.timestamp_ms
            if r.partition is not None:
                kwargs["partition"] = r.partition
            producer.produce(topic, **kwargs)
            if batch_records and (i + 1) % batch_records == 0:
                _confluent_flush(producer)
            else:
                producer.poll(0)
        _confluent_flush(producer)
        if errors:
            raise ProduceError(errors)
        assert all(r is not None for r in results), "missing delivery reports"
        return results  # type: ignore[return-value]

    # -- offsets ------------------------------------------------------------------------------------
    def watermarks(self, topic, partition):
        from confluent_kafka import TopicPartition

        return self._helper_consumer().get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)

    def offsets_for_times(self, topic, partition, timestamp_ms):
        from confluent_kafka import TopicPartition

        [tp] = self._helper_consumer().offsets_for_times([TopicPartition(topic, partition, timestamp_ms)], timeout=10)
        if tp.error is not None:
            raise RuntimeError(f"offsets_for_times: {tp.error}")
        return tp.offset  # librdkafka reports "no such offset" as -1 (OFFSET_END), Kafka's own answer

    def list_offsets(self, topic, partition, spec, isolation_level="read_uncommitted"):
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        if spec == "earliest":
            ospec = OffsetSpec.earliest()
        elif spec == "latest":
            ospec = OffsetSpec.latest()
        else:
            ospec = OffsetSpec.for_timestamp(int(spec))
        level = (
            IsolationLevel.READ_COMMITTED if isolation_level == "read_committed" else IsolationLevel.READ_UNCOMMITTED
        )
        futures = self._admin.list_offsets(
            {TopicPartition(topic, partition): ospec}, isolation_level=level, request_timeout=10
        )
        [info] = self._result(futures)
        return info.offset

    # -- consume ------------------------------------------------------------------------------------
    def _consume(self, topic, partition, from_offset, count, isolation_level, reset, timeout):
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        consumer = Consumer(
            self._consumer_conf(
                **{
                    "auto.offset.reset": {"none": "error"}.get(reset, reset),
                    "isolation.level": isolation_level,
                    "enable.partition.eof": True,
                }
            )
        )
        out: list[Consumed] = []
        try:
            consumer.assign([TopicPartition(topic, partition, from_offset)])
            deadline = time.monotonic() + timeout
            while count is None or len(out) < count:
                if time.monotonic() > deadline:
                    raise AssertionError(f"confluent: consumed {len(out)} of {count} records in {timeout}s")
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if count is None:
                            break
                        continue
                    if err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                        raise OffsetOutOfRange(str(err))
                    raise RuntimeError(f"confluent consume error: {err}")
                ts_type, ts = msg.timestamp()
                out.append(
                    Consumed(
                        topic=msg.topic(),
                        partition=msg.partition(),
                        offset=msg.offset(),
                        key=msg.key(),
                        value=msg.value(),
                        headers=tuple(msg.headers() or ()),
                        timestamp_ms=ts,
                        timestamp_type={1: CREATE_TIME, 2: LOG_APPEND_TIME}.get(ts_type, NO_TIMESTAMP),
                    )
                )
        finally:
            consumer.close()
        return out

    # -- groups -------------------------------------------------------------------------------------
    def commit(self, group, offsets, metadata=""):
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(self._consumer_conf(group))
        try:
            tps = [TopicPartition(t, p, o, metadata) for (t, p), o in offsets.items()]
            result = consumer.commit(offsets=tps, asynchronous=False)
            bad = [tp for tp in result if tp.error is not None]
            assert not bad, bad
        finally:
            consumer.close()

    def committed(self, group, partitions):
        from confluent_kafka import OFFSET_INVALID, Consumer, TopicPartition

        consumer = Consumer(self._consumer_conf(group))
        try:
            result = consumer.committed([TopicPartition(t, p) for t, p in partitions], timeout=15)
        finally:
            consumer.close()
        out = {}
        for tp in result:
            if tp.error is not None:
                raise RuntimeError(f"committed: {tp.error}")
            out[(tp.topic, tp.partition)] = None if tp.offset == OFFSET_INVALID else tp.offset
        return out

    def group_offsets(self, group):
        from confluent_kafka import ConsumerGroupTopicPartitions

        futures = self._admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=15)
        [result] = self._result(futures)
        out = {}
        for tp in result.topic_partitions:
            if tp.error is not None:
                raise RuntimeError(f"group offsets: {tp.error}")
            try:
                metadata = tp.metadata or ""
            except UnicodeDecodeError:
                # confluent-kafka's binding reads commit metadata as a NUL-terminated C string: metadata
                # committed by another client (no trailing NUL) comes back with stray bytes.
                metadata = "<unreadable>"
            out[(tp.topic, tp.partition)] = (tp.offset, metadata)
        return out

    def describe_group(self, group):
        [desc] = self._result(self._admin.describe_consumer_groups([group], request_timeout=15))
        return desc.state.name.upper(), len(desc.members)

    def group_member(self, group, topic, *, session_timeout_ms=6000):
        return ConfluentGroupMember(
            self._consumer_conf(
                group,
                **{
                    "group.protocol": "classic",
                    "partition.assignment.strategy": "range",
                    "session.timeout.ms": session_timeout_ms,
                    "heartbeat.interval.ms": 500,
                    "auto.offset.reset": "earliest",
                },
            ),
            topic,
        ).start()

    def close(self):
        if self._helper is not None:
            self._helper.close()
            self._helper = None


def _confluent_flush(producer, timeout: float = 60.0) -> None:
    remaining = producer.flush(timeout)
    assert remaining == 0, f"{remaining} records still undelivered after {timeout}s"


class ConfluentGroupMember(GroupMember):
    def __init__(self, conf: dict, topic: str):
        super().__init__()
        from confluent_kafka import Consumer

        self._consumer = Consumer(conf)
        self._consumer.subscribe([topic])

    def _poll_once(self):
        msg = self._consumer.poll(0.1)
        if msg is not None and msg.error() is not None and msg.error().code() != -191:  # -191: PARTITION_EOF
            self.errors.append(str(msg.error()))
        self._set_assignment((tp.topic, tp.partition) for tp in self._consumer.assignment())

    def _close_consumer(self):
        self._consumer.close()


# ================================================================================================
# kafka-python
# ================================================================================================


class KafkaPythonClient(ClientAdapter):
    name = "kafka-python"
    supports_null_header_values = False  # KafkaProducer.send() insists on (str, bytes) headers
    supports_null_key_and_value = False  # ... and refuses a record whose key and value are both None

    def __init__(self, bootstrap: str):
        super().__init__(bootstrap)
        from kafka import KafkaAdminClient

        self._admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
        self._helper = None

    def _consumer(self, group: str | None = None, **extra):
        from kafka import KafkaConsumer

        conf = {
            "bootstrap_servers": self.bootstrap,
            "group_id": group,
            "enable_auto_commit": False,
            "fetch_max_wait_ms": 100,
            "request_timeout_ms": 30000,
        }
        conf.update(extra)
        return KafkaConsumer(**conf)

    def _helper_consumer(self):
        if self._helper is None:
            self._helper = self._consumer()
        return self._helper

    # -- topics -------------------------------------------------------------------------------------
    def create_topic(self, name, partitions=1, configs=None, replication_factor=1):
        self._admin.create_topics(
            {
                name: {
                    "num_partitions": partitions,
                    "replication_factor": replication_factor,
                    "configs": dict(configs or {}),
                }
            },
            timeout_ms=30000,
        )
        self.wait_for_partitions(name, partitions)

    def partition_count(self, topic):
        [t] = self._admin.describe_topics([topic])
        if t.get("error_code", 0) != 0:
            return -1
        parts = t["partitions"]
        if any(p.get("error_code", 0) != 0 or p["leader_id"] < 0 for p in parts):
            return -1
        return len(parts)

    def create_partitions(self, topic, total):
        self._admin.create_partitions({topic: total}, timeout_ms=30000)
        self.wait_for_partitions(topic, total)

    def describe_configs(self, topic):
        from kafka.admin import ConfigResource, ConfigResourceType

        result = self._admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
        entries = result["topic"][topic]
        return {
            name: ConfigValue(
                name=name,
                value=e["value"],
                source=_source_name(e["config_source"]),
                is_default=e["config_source"] == "DEFAULT_CONFIG",
                read_only=bool(e["read_only"]),
            )
            for name, e in entries.items()
        }

    def alter_config(self, topic, key, value):
        from kafka.admin import ConfigResource, ConfigResourceType

        result = self._admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, {key: value})], incremental=True
        )
        assert result["topic"][topic] == "OK", result

    def delete_records(self, topic, partition, before_offset):
        from kafka import TopicPartition

        tp = TopicPartition(topic, partition)
        result = self._admin.delete_records({tp: before_offset}, timeout_ms=30000)
        return result[tp]["low_watermark"]

    def cluster_id(self):
        return self._admin.describe_cluster()["cluster_id"]

    def delete_topic(self, name):
        self._admin.delete_topics([name], timeout_ms=30000)

    def list_groups(self):
        return {g["group_id"] for g in self._admin.list_groups()}

    def delete_group(self, group):
        result = self._admin.delete_groups([group])[group]
        if result != "OK":
            raise RuntimeError(f"delete_groups({group}): {result}")

    def brokers(self):
        return {b["broker_id"]: (b["host"], b["port"]) for b in self._admin.describe_cluster()["brokers"]}

    # -- produce ------------------------------------------------------------------------------------
    def produce(self, topic, records, *, compression=None, batch_records=None, idempotent=False, linger_ms=1000):
        from kafka import KafkaProducer
        from kafka.errors import KafkaError

        producer = KafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            linger_ms=linger_ms if batch_records else 5,
            batch_size=1000000,
            max_request_size=4000000,
            compression_type=compression,
            enable_idempotence=idempotent,
            request_timeout_ms=30000,
        )
        try:
            futures = []
            for i, r in enumerate(records):
                futures.append(
                    producer.send(
                        topic,
                        key=r.key,
                        value=r.value,
                        headers=list(r.headers),
                        partition=r.partition,
                        timestamp_ms=r.timestamp_ms,
                    )
                )
                if batch_records and (i + 1) % batch_records == 0:
                    producer.flush(60)
            producer.flush(60)
            results, errors = [], []
            for i, f in enumerate(futures):
                try:
                    md = f.get(timeout=60)
                    results.append((md.partition, md.offset))
                except KafkaError as exc:
                    errors.append(f"record {i}: {exc!r}")
            if errors:
                raise ProduceError(errors)
            return results
        finally:
            producer.close(timeout=10)

    # -- offsets ------------------------------------------------------------------------------------
    def watermarks(self, topic, partition):
        from kafka import TopicPartition

        tp = TopicPartition(topic, partition)
        c = self._helper_consumer()
        return c.beginning_offsets([tp], timeout_ms=10000)[tp], c.end_offsets([tp], timeout_ms=10000)[tp]

    def offsets_for_times(self, topic, partition, timestamp_ms):
        from kafka import TopicPartition

        tp = TopicPartition(topic, partition)
        found = self._helper_consumer().offsets_for_times({tp: timestamp_ms}, timeout_ms=10000)[tp]
        return -1 if found is None else found.offset  # kafka-python maps Kafka's -1 to None

    def list_offsets(self, topic, partition, spec, isolation_level="read_uncommitted"):
        from kafka import TopicPartition
        from kafka.protocol.consumer import IsolationLevel, OffsetSpec, OffsetTimestamp

        if spec == "earliest":
            ospec = OffsetSpec.EARLIEST
        elif spec == "latest":
            ospec = OffsetSpec.LATEST
        else:
            ospec = OffsetTimestamp(int(spec))
        level = (
            IsolationLevel.READ_COMMITTED if isolation_level == "read_committed" else IsolationLevel.READ_UNCOMMITTED
        )
        tp = TopicPartition(topic, partition)
        result = self._admin.list_partition_offsets({tp: ospec}, isolation_level=level, timeout_ms=10000)
        return result[tp].offset

    # -- consume ------------------------------------------------------------------------------------
    def _consume(self, topic, partition, from_offset, count, isolation_level, reset, timeout):
        from kafka import TopicPartition
        from kafka.errors import OffsetOutOfRangeError

        tp = TopicPartition(topic, partition)
        consumer = self._consumer(auto_offset_reset=reset, isolation_level=isolation_level)
        out: list[Consumed] = []
        try:
            consumer.assign([tp])
            consumer.seek(tp, from_offset)
            end = None
            deadline = time.monotonic() + timeout
            while count is None or len(out) < count:
                if time.monotonic() > deadline:
                    raise AssertionError(f"kafka-python: consumed {len(out)} of {count} records in {timeout}s")
                if count is None:
                    if end is None:
                        end = consumer.end_offsets([tp], timeout_ms=10000)[tp]
                    if consumer.position(tp, timeout_ms=10000) >= end:
                        break
                try:
                    batch = consumer.poll(timeout_ms=200)
                except OffsetOutOfRangeError as exc:
                    raise OffsetOutOfRange(str(exc)) from exc
                for recs in batch.values():
                    for m in recs:
                        out.append(
                            Consumed(
                                topic=m.topic,
                                partition=m.partition,
                                offset=m.offset,
                                key=m.key,
                                value=m.value,
                                headers=tuple((k, v) for k, v in (m.headers or ())),
                                timestamp_ms=m.timestamp,
                                timestamp_type={0: CREATE_TIME, 1: LOG_APPEND_TIME}.get(m.timestamp_type, NO_TIMESTAMP),
                            )
                        )
        finally:
            consumer.close(autocommit=False)
        return out if count is None else out[:count]

    # -- groups -------------------------------------------------------------------------------------
    def commit(self, group, offsets, metadata=""):
        from kafka import OffsetAndMetadata, TopicPartition

        consumer = self._consumer(group)
        try:
            consumer.commit({TopicPartition(t, p): OffsetAndMetadata(o, metadata, -1) for (t, p), o in offsets.items()})
        finally:
            consumer.close(autocommit=False)

    def committed(self, group, partitions):
        from kafka import TopicPartition

        consumer = self._consumer(group)
        try:
            return {(t, p): consumer.committed(TopicPartition(t, p), timeout_ms=15000) for t, p in partitions}
        finally:
            consumer.close(autocommit=False)

    def group_offsets(self, group):
        result = self._admin.list_group_offsets({group: None})[group]
        return {(tp.topic, tp.partition): (om.offset, om.metadata or "") for tp, om in result.items()}

    def describe_group(self, group):
        desc = self._admin.describe_groups([group])[group]
        assert desc["error"] is None, desc
        return desc["group_state"].upper().replace("COMPLETINGREBALANCE", "COMPLETING_REBALANCE").replace(
            "PREPARINGREBALANCE", "PREPARING_REBALANCE"
        ), len(desc["members"])

    def group_member(self, group, topic, *, session_timeout_ms=6000):
        from kafka.coordinator.assignors.range import RangePartitionAssignor

        consumer = self._consumer(
            group,
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=500,
            auto_offset_reset="earliest",
            partition_assignment_strategy=[RangePartitionAssignor],
        )
        consumer.subscribe([topic])
        return KafkaPythonGroupMember(consumer).start()

    def close(self):
        if self._helper is not None:
            self._helper.close(autocommit=False)
            self._helper = None
        self._admin.close()


class KafkaPythonGroupMember(GroupMember):
    def __init__(self, consumer):
        super().__init__()
        self._consumer = consumer

    def _poll_once(self):
        self._consumer.poll(timeout_ms=100)
        self._set_assignment((tp.topic, tp.partition) for tp in self._consumer.assignment())

    def _close_consumer(self):
        self._consumer.close(autocommit=False)


# Headers some records carry besides the usual three: (modulus, remainder, header) for record i with i % m == r.
_EXTRA_HEADERS: tuple[tuple[int, int, tuple[str, bytes]], ...] = (
    (3, 0, ("empty", b"")),
    (4, 0, ("ключ-ü", "значение".encode())),
    (6, 1, ("dup", b"third")),
    (9, 2, ("", b"empty key")),
)


def make_records(
    n: int,
    *,
    base_ts: int,
    seed: int = 0,
    null_header_values: bool = True,
    null_key_and_value: bool = True,
    partition: int | None = None,
    value_size: int = 120,
    compressible: bool = False,
) -> list[Record]:
    """Deterministic, awkward records: None keys, None (tombstone) and empty values, binary bytes,
    duplicate header keys, None and empty header values, non-ASCII header keys; timestamp base_ts + i.
    """
    rng = random.Random(seed)
    out = []
    for i in range(n):
        # The value first: the random bytes each record draws stay in the same order for a seed.
        key, value = _key_and_value(i, rng, value_size, compressible, null_key_and_value)
        headers = _headers(i, rng, null_header_values)
        out.append(Record(key=key, value=value, headers=headers, timestamp_ms=base_ts + i, partition=partition))
    return out


def _key_and_value(
    i: int, rng: random.Random, value_size: int, compressible: bool, null_key_and_value: bool
) -> tuple[bytes | None, bytes | None]:
    key = None if i % 7 == 0 else f"key-{i % 97}".encode()
    if compressible:
        value: bytes | None = (f"value {i} " + "abcabcabc" * (i % 20)).encode()
    else:
        value = rng.randbytes(rng.randrange(value_size))
    if i % 11 == 0:
        value = None
    elif i % 13 == 0:
        value = b""
    if key is None and value is None and not null_key_and_value:
        key = b""
    return key, value


def _headers(i: int, rng: random.Random, null_header_values: bool) -> tuple[tuple[str, bytes | None], ...]:
    if i % 5 == 0:
        return ()
    headers: list[tuple[str, bytes | None]] = [("dup", b"first"), ("trace", rng.randbytes(8)), ("dup", b"second")]
    headers += [header for modulus, remainder, header in _EXTRA_HEADERS if i % modulus == remainder]
    if null_header_values and i % 2 == 1:
        headers.append(("nullable", None))
    return tuple(headers)


def records_for(client: ClientAdapter, n: int, **kwargs) -> list[Record]:
    """make_records limited to what ``client`` can produce."""
    kwargs.setdefault("null_header_values", client.supports_null_header_values)
    kwargs.setdefault("null_key_and_value", client.supports_null_key_and_value)
    return make_records(n, **kwargs)


def past_ts(hours: float = 24.0) -> int:
    """A CreateTime base safely in the past (brokers may reject timestamps in the future)."""
    return int((time.time() - hours * 3600) * 1000)


def make_client(name: str, bootstrap: str) -> ClientAdapter:
    if name == "confluent":
        return ConfluentClient(bootstrap)
    if name == "kafka-python":
        return KafkaPythonClient(bootstrap)
    raise ValueError(name)


def member_main(argv: list[str] | None = None) -> None:
    """Run one group member in its own process (used by the session-timeout test).

    Prints one JSON line with the sorted assignment each time it changes; runs until killed.
    """
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--client", required=True, choices=CLIENT_NAMES)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    args = parser.parse_args(argv)
    client = make_client(args.client, args.bootstrap)
    member = client.group_member(args.group, args.topic, session_timeout_ms=args.session_timeout_ms)
    last = None
    while True:
        current = sorted(member.assignment)
        if current != last:
            print(json.dumps({"assignment": current, "errors": member.errors}), flush=True)
            last = current
        time.sleep(0.05)


if __name__ == "__main__":
    member_main()
