"""The Kafka-backed store: the ``_schemas`` topic of the kafkastore cluster.

A background thread creates the topic when absent (1 partition, compacted, as Confluent does),
then tails it from the beginning into the RegistryState, forever, with a consumer that is only
assigned the partition (no group membership, no commits). If the cluster is unreachable the
thread keeps retrying, while the HTTP layer answers reads from what was applied so far.

Writes follow Confluent's read-your-writes protocol: the leader first appends a NOOP record
and waits until it has applied the log up to it (so it decides on the latest state), then
appends the real records and waits until it has applied them before answering.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from . import errors
from .schema_log import NOOP_KEY, Record, RegistryState, encode

log = logging.getLogger(__name__)

DEFAULT_TOPIC = "_schemas"
WRITE_TIMEOUT_S = 10.0
LOAD_WAIT_S = 10.0
_RETRY_S = 2.0
POLL_S = 0.1  # longest the reader waits before it sees a stop: a schema redirect restarts the registry
_LOG_EVERY_S = 30.0
_ERROR_TTL_S = 15.0


class RepeatFilter(logging.Filter):
    """Pass a librdkafka line once per window: while a cluster is down it repeats the same
    connection error many times a second, and the store already reports it periodically."""

    def __init__(self, window_s: float = 60.0) -> None:
        super().__init__()
        self.window_s = window_s
        self._last: dict[str, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        # Drop the variable parts ("after 12ms in state CONNECT") so repeats compare equal.
        key = re.sub(r"\d+", "#", record.getMessage())
        now = time.monotonic()
        if now - self._last.get(key, -self.window_s) < self.window_s:
            return False
        self._last[key] = now
        return True


LIBRDKAFKA_LOG = logging.getLogger("kafka_dr_dev.local.registry.librdkafka")
LIBRDKAFKA_LOG.addFilter(RepeatFilter())


# librdkafka security settings for the kafkastore cluster (security.protocol, sasl.*, ssl.ca.location), set once
# at start (`use_security`), as Confluent's kafkastore.security.protocol and kafkastore.sasl.* are: the store and
# the leader election are clients of the same cluster and both need them.
_SECURITY: dict[str, Any] = {}


def use_security(settings: dict[str, Any]) -> None:
    """Connect every later client of the kafkastore cluster with these settings."""
    _SECURITY.clear()
    _SECURITY.update(settings)


def client_config(bootstrap: str) -> dict[str, Any]:
    """Settings every librdkafka client of the registry shares."""
    return {
        "bootstrap.servers": bootstrap,
        "logger": LIBRDKAFKA_LOG,
        "socket.connection.setup.timeout.ms": 5000,
        **_SECURITY,
    }


def ensure_topic(admin: AdminClient, topic: str, configs: dict[str, str]) -> None:
    """Create a single-partition ``topic`` with ``configs`` unless it exists (raises KafkaException
    when the cluster cannot be reached)."""
    metadata = admin.list_topics(timeout=5)
    existing = metadata.topics.get(topic)
    if existing is not None and existing.error is None:
        if len(existing.partitions) != 1:
            log.warning(
                "topic %s has %d partitions; the registry only reads partition 0",
                topic,
                len(existing.partitions),
            )
        return
    replicas = min(3, max(1, len(metadata.brokers)))
    futures = admin.create_topics([NewTopic(topic, 1, replicas, config=configs)], operation_timeout=10)
    try:
        futures[topic].result(timeout=15)
        log.info("created topic %s (1 partition, replication factor %d, %s)", topic, replicas, configs)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


class KafkaStore:
    """Keeps a RegistryState equal to the ``_schemas`` log and appends to that log."""

    def __init__(self, bootstrap: str, state: RegistryState, topic: str = DEFAULT_TOPIC) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.state = state
        self._error: tuple[float, str] | None = None
        self.loaded = threading.Event()  # set once the log was applied up to its end at startup
        self.cluster_id: str | None = None  # the kafkastore cluster's id, once reached (GET /v1/metadata/id)
        self._next_offset = 0
        self._applied = threading.Condition()
        self._stop = threading.Event()
        self._producer: Producer | None = None
        self._thread = threading.Thread(target=self._run, name="kafkastore-reader", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        if self._producer is not None:
            self._producer.flush(2)

    @property
    def last_error(self) -> str | None:
        """The latest client error, while recent: librdkafka repeats it while the cluster is down
        and says nothing once it is back."""
        if self._error is None or time.monotonic() - self._error[0] > _ERROR_TTL_S:
            return None
        return self._error[1]

    def _set_error(self, message: str) -> None:
        self._error = (time.monotonic(), message)

    def _on_error(self, error: KafkaError) -> None:
        self._set_error(f"kafkastore {self.bootstrap}: {error.str()}")
        log.debug("kafkastore client error: %s", error)

    def _run(self) -> None:
        last_logged = 0.0
        admin = AdminClient({**client_config(self.bootstrap), "error_cb": self._on_error})
        while not self._stop.is_set():
            try:
                ensure_topic(admin, self.topic, {"cleanup.policy": "compact"})
                self.cluster_id = admin.list_topics(self.topic, timeout=10).cluster_id
                break
            except KafkaException as exc:
                self._set_error(f"kafkastore {self.bootstrap} unreachable: {exc.args[0].str()}")
                if time.monotonic() - last_logged > _LOG_EVERY_S:
                    log.warning("%s; retrying in the background", self.last_error)
                    last_logged = time.monotonic()
                self._stop.wait(_RETRY_S)
        if self._stop.is_set():
            return
        self._error = None
        self._producer = Producer(
            {
                **client_config(self.bootstrap),
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 0,
                "message.timeout.ms": int(WRITE_TIMEOUT_S * 1000),
                "error_cb": self._on_error,
            }
        )
        self._tail()

    def _tail(self) -> None:
        consumer = Consumer(
            {
                **client_config(self.bootstrap),
                "group.id": f"kdr-schema-registry-reader-{uuid.uuid4()}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                # At the log's end a fetch waits this long for the next record; the broker answers as soon as one
                # is appended, so a longer wait delays nothing and keeps an idle registry's fetches few.
                "fetch.wait.max.ms": 5000,
                "error_cb": self._on_error,
            }
        )
        partition = TopicPartition(self.topic, 0, OFFSET_BEGINNING)
        consumer.assign([partition])
        log.info("reading %s from %s", self.topic, self.bootstrap)
        end = self._end_offset(consumer, partition)
        if end == 0:
            self._set_loaded(0)
        try:
            while not self._stop.is_set():
                message = consumer.poll(POLL_S)
                if message is None:
                    continue
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        self._set_loaded(message.offset())  # when the end offset was not known at the start
                    else:
                        self._on_error(error)
                    continue
                self.state.apply(message.key(), message.value())
                with self._applied:
                    self._next_offset = message.offset() + 1
                    self._applied.notify_all()
                if end is not None and self._next_offset >= end:
                    self._set_loaded(self._next_offset)
        finally:
            consumer.close()

    def _end_offset(self, consumer: Consumer, partition: TopicPartition) -> int | None:
        """The log's end as the reading starts: loaded once applied up to it, without waiting for an empty fetch.
        None if the cluster does not answer (the end-of-partition event says it then)."""
        try:
            return consumer.get_watermark_offsets(partition, timeout=5)[1]
        except KafkaException as exc:
            log.debug("end offset of %s unknown: %s", self.topic, exc)
            return None

    def _set_loaded(self, offset: int) -> None:
        if not self.loaded.is_set():
            log.info("loaded %s up to offset %d", self.topic, offset)
            self.loaded.set()

    def wait_loaded(self, timeout: float = LOAD_WAIT_S) -> None:
        """Hold a read while a reachable store is still being loaded, so a fresh instance does not
        answer "not found" for schemas it is about to read; an unreachable store holds nothing. The
        hold starts with the process, before the topic is found and the reading starts: a read
        in those first moments (a restart's readiness probe answered, a client's first lookup)
        would otherwise find nothing."""
        deadline = time.monotonic() + timeout
        while not self.loaded.is_set() and self.last_error is None and time.monotonic() < deadline:
            self.loaded.wait(0.1)

    def _unavailable(self) -> errors.RegistryError:
        reason = self.last_error or f"kafkastore {self.bootstrap} is still connecting"
        return errors.store_error(f"Error in the backend data store: {reason}")

    def append(self, records: list[Record]) -> int:
        """Append ``records`` in order and return the offset of the last one."""
        producer = self._producer
        if producer is None:
            raise self._unavailable()
        results: list[tuple[KafkaError | None, int]] = []

        def delivered(err: KafkaError | None, message: Any) -> None:
            results.append((err, message.offset() if err is None else -1))

        try:
            for key, value in records:
                producer.produce(self.topic, key=encode(key), value=encode(value), partition=0, on_delivery=delivered)
        except (BufferError, KafkaException) as exc:
            raise errors.store_error(
                f"Error in the backend data store: produce to {self.topic} failed: {exc}"
            ) from None
        producer.flush(WRITE_TIMEOUT_S + 2)
        if len(results) < len(records):
            raise errors.operation_timeout(f"Write to {self.topic} on {self.bootstrap} timed out")
        failed = [err for err, _ in results if err is not None]
        if failed:
            raise errors.store_error(
                f"Error in the backend data store: write to {self.topic} failed: {failed[0].str()}"
            )
        return max(offset for _, offset in results)

    def wait_applied(self, offset: int, timeout: float = WRITE_TIMEOUT_S) -> None:
        """Block until the record at ``offset`` was applied to the state."""
        with self._applied:
            if not self._applied.wait_for(lambda: self._next_offset > offset, timeout):
                raise errors.operation_timeout(
                    f"Timed out waiting for the registry to read back offset {offset} of {self.topic}"
                )

    def sync(self) -> None:
        """Apply the log up to now (Confluent's NOOP read-your-writes barrier)."""
        self.wait_applied(self.append([(NOOP_KEY, None)]))

    def write(self, records: list[Record]) -> None:
        """Append ``records`` and return once the state reflects them."""
        if records:
            self.wait_applied(self.append(records))
