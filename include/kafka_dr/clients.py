"""What kafka-dr's Kafka clients share: one-line errors, `redact` for logs, and the read, offset and group helpers
over confluent-kafka (the settings they are made with come from kafka_dr.access). librdkafka's own log lines go to
the Python logger `kafka_dr.librdkafka`, not to stderr.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, wait
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

LIBRDKAFKA_LOG = logging.getLogger("kafka_dr.librdkafka")
"""Where kafka-dr's clients send librdkafka's log lines (confluent-kafka hands them over as a client is polled): a
job's or task's log shows them, the CLI only with --verbose, so a command's error stays one line."""
SECRET_HINTS = ("password", "secret", "sasl.jaas.config", "ssl.key.pem", "oauthbearer", "token")


class ClientConfigError(ValueError):
    """A malformed client settings variable; the message names the variable, never its value."""


def error_text(exc: BaseException) -> str:
    """One line for an error: librdkafka's own message for a KafkaException (without the KafkaError(...)
    wrapper), else the exception's text, else its type."""
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    text = error.str() if isinstance(error, KafkaError) else str(exc)
    return " ".join(text.split()) or type(exc).__name__


def redact(settings: dict[str, Any]) -> dict[str, Any]:
    """A copy safe to log: values of secret-looking keys replaced."""
    return {k: ("***" if any(h in k.lower() for h in SECRET_HINTS) else v) for k, v in settings.items()}


# A partition whose leader the client's metadata does not know yet: a topic just created or grown on Apache Kafka,
# whose CreateTopics answers once the controller committed it, before the new leader reaches the broker's metadata
# and the client's cache (which a list_offsets does not refresh); or a broker just restarted, whose partitions have a
# new leader epoch (FENCED_LEADER_EPOCH to a client with the old one) or are not led yet. A refresh finds it.
STALE_METADATA = (
    KafkaError.FENCED_LEADER_EPOCH,
    KafkaError.OFFSET_NOT_AVAILABLE,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._UNKNOWN_TOPIC,
    KafkaError._NOENT,
    KafkaError.UNKNOWN_LEADER_EPOCH,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
)

# A cluster away for a moment: its connection lost, or its broker handle dropped (a node killed and started again,
# which librdkafka forgets and learns anew: a call in flight fails at once with _DESTROY_BROKER, not after its timeout).
AWAY_FOR_NOW = (
    KafkaError._TRANSPORT,
    KafkaError._DESTROY_BROKER,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._TIMED_OUT,
)


def wait_for_leaders(admin: AdminClient, topics: list[str], timeout: float = 15.0) -> None:
    """Until every partition of `topics` has a leader in fresh metadata (which also refreshes `admin`'s cache): what
    a client can rely on after creating topics or partitions on Apache Kafka. TimeoutError names the first without."""
    deadline = time.monotonic() + timeout
    for topic in topics:
        while True:
            meta = admin.list_topics(topic=topic, timeout=max(1.0, deadline - time.monotonic())).topics.get(topic)
            if meta is not None and meta.error is None and all(p.leader >= 0 for p in meta.partitions.values()):
                break
            if time.monotonic() >= deadline:
                raise TimeoutError(f"topic {topic} has a partition without a leader after {timeout:g} s")
            time.sleep(0.1)


# What a group coordinator answers while it loads its partition of __consumer_offsets or moves (Apache Kafka, right
# after a start or a failover).
COORDINATOR_BUSY = (
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
)


# librdkafka 2.16 (confluent-kafka 2.16.1) aborts the whole process (an assertion in
# rd_kafka_enq_once_del_source_return) when a group-coordinator admin request (DescribeGroups, ListConsumerGroupOffsets,
# AlterConsumerGroupOffsets) times out on the client while it is still queued. A thousand sent at once on loaded cores
# wait that long, the last of them: a continuous replicator's checkpoint pass over 1,000 groups killed it so. Sent this
# many at a time, each is answered in milliseconds.
GROUPS_IN_FLIGHT = 50


def in_windows(
    items: Sequence[Any], ask: Callable[[Sequence[Any]], dict[str, Future]], timeout: float
) -> dict[str, Future]:
    """`ask` for GROUPS_IN_FLIGHT of `items` at a time, the next window sent once this one is answered (or `timeout`
    passed: librdkafka's own request timeout answers first); every window's futures, by group."""
    futures: dict[str, Future] = {}
    for start in range(0, len(items), GROUPS_IN_FLIGHT):
        window = ask(items[start : start + GROUPS_IN_FLIGHT])
        wait(list(window.values()), timeout)
        futures |= window
    return futures


# A coordinator that may still answer NOT_COORDINATOR next: busy, or not heard from within the timeout.
UNSETTLED = (*COORDINATOR_BUSY, KafkaError._TIMED_OUT)
# One DescribeGroups attempt's bound: it answers in milliseconds, so a request unanswered this long was lost (a node
# just started dropped it) and is asked again, rather than waited for until the caller's whole deadline.
DESCRIBE_ATTEMPT_S = 8.0


def describe_groups(admin: AdminClient, groups: list[str], timeout: float = 15.0) -> dict[str, Any]:
    """Each group's DescribeGroups answer: its description, or the KafkaException its coordinator answered
    (GROUP_ID_NOT_FOUND for a group it does not know). A group whose coordinator is busy, or that got no answer in
    time (a node just started, on loaded cores), is asked again until `timeout`; past it, its answer is that error.
    Each attempt waits DESCRIBE_ATTEMPT_S at most."""
    deadline = time.monotonic() + timeout
    answers: dict[str, Any] = {}
    pending = list(dict.fromkeys(groups))
    while pending:
        busy = []
        left = min(DESCRIBE_ATTEMPT_S, max(1.0, deadline - time.monotonic()))
        asked = in_windows(pending, functools.partial(admin.describe_consumer_groups, request_timeout=left), left + 5)
        for group, future in asked.items():
            try:
                answers[group] = future.result(left + 5.0)  # librdkafka's own request timeout answers first
            except KafkaException as exc:
                answers[group] = exc
                if exc.args[0].code() in UNSETTLED:
                    busy.append(group)
            except TimeoutError:  # no answer at all: a KafkaException like the others, never a bare traceback
                error = KafkaError(KafkaError._TIMED_OUT, f"DescribeGroups of {group} unanswered after {left:g} s")
                answers[group] = KafkaException(error)
                busy.append(group)
        pending = busy if time.monotonic() < deadline else []
        if pending:
            time.sleep(0.2)
    return answers


def list_group_offsets(
    admin: AdminClient, requests: list[ConsumerGroupTopicPartitions], timeout: float = 15.0
) -> dict[str, Future]:
    """ListConsumerGroupOffsets for each request (in windows), once every group's coordinator answers: confluent-kafka
    2.16.1 crashes the process (a segfault in librdkafka) when a coordinator answers it NOT_COORDINATOR, as Apache
    Kafka does while the coordinator loads. TimeoutError names a group whose coordinator stays busy."""
    for group, answer in describe_groups(admin, [r.group_id for r in requests], timeout).items():
        if isinstance(answer, KafkaException) and answer.args[0].code() in UNSETTLED:
            raise TimeoutError(f"the coordinator of group {group} is still loading after {timeout:g} s")

    def ask(window: Sequence[ConsumerGroupTopicPartitions]) -> dict[str, Future]:
        return {r.group_id: admin.list_consumer_group_offsets([r], request_timeout=timeout)[r.group_id] for r in window}

    return in_windows(requests, ask, timeout + 5)


def offsets_of(
    admin: AdminClient,
    partitions: list[tuple[str, int]],
    spec: OffsetSpec,
    isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
    timeout: float = 15.0,
) -> dict[tuple[str, int], int]:
    """ListOffsets of many partitions in one request. A partition whose leader the client or the broker does not
    know yet (a topic just created; a broker just started, which answers NOT_LEADER_FOR_PARTITION until it has taken
    over its partitions) is asked again after a metadata refresh, until `timeout`: librdkafka's admin call does not
    retry."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            futures = admin.list_offsets(
                {TopicPartition(t, p): spec for t, p in partitions}, isolation_level=isolation, request_timeout=timeout
            )
            return {(tp.topic, tp.partition): future.result(timeout).offset for tp, future in futures.items()}
        except KafkaException as exc:
            if exc.args[0].code() not in STALE_METADATA or time.monotonic() >= deadline:
                raise
        time.sleep(0.1)
        wait_for_leaders(admin, sorted({t for t, _ in partitions}), max(1.0, deadline - time.monotonic()))


def end_offsets(
    admin: AdminClient, partitions: list[tuple[str, int]], isolation: IsolationLevel, timeout: float = 15.0
) -> dict[tuple[str, int], int]:
    """End offsets of many partitions in one request: high watermarks (read_uncommitted) or last stable offsets
    (read_committed)."""
    return offsets_of(admin, partitions, OffsetSpec.latest(), isolation, timeout)


def start_offset(admin: AdminClient, topic: str, partition: int, timeout: float = 15.0) -> int:
    """A partition's log start offset."""
    return offsets_of(admin, [(topic, partition)], OffsetSpec.earliest(), timeout=timeout)[(topic, partition)]


def answers(config: Mapping[str, Any], timeout: float) -> bool:
    """Whether the cluster answers a request within `timeout` seconds. A cluster whose every broker refuses the
    connection counts as not answering at once (librdkafka's "all brokers down"), not after the timeout: only a
    cluster that does not answer at all (a lost network) costs the whole `timeout`."""
    down = threading.Event()

    def on_error(error: KafkaError) -> None:
        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            down.set()

    admin = AdminClient({**config, "error_cb": on_error})
    future = admin.describe_cluster(request_timeout=timeout)
    deadline = time.monotonic() + timeout
    while not future.done() and not down.is_set() and time.monotonic() < deadline:
        admin.poll(0.02)  # serves error_cb
    return future.done() and future.exception() is None


def init_transactions(producer: Producer, timeout: float = 30.0) -> None:
    """`producer.init_transactions`, with a broker connection up first. Called before any broker is up,
    librdkafka finds no broker to ask for the transaction coordinator and, about one time in six, waits
    for its 500 ms coordinator-query timer (a continuous replicator opens its writers every epoch)."""
    producer.list_topics(timeout=timeout)
    producer.init_transactions(timeout)


def next_batch(consumer: Consumer, max_messages: int = 10_000, wait: float = 0.1) -> list[Message]:
    """What has arrived, at once; else the first record within `wait` seconds. (consume(n, timeout)
    would hold until n records or the whole timeout, adding its timeout to every short batch.)"""
    batch = consumer.consume(max_messages, timeout=0)
    if batch:
        return batch
    message = consumer.poll(wait)
    return [] if message is None else [message]


def read_partition(
    consumer: Consumer, topic: str, partition: int, start: int, stop: int, idle_timeout: float
) -> Iterator[Message]:
    """Records of one partition from `start` (an offset or OFFSET_BEGINNING) to `stop` (exclusive) or
    the end of the partition, whichever comes first. `consumer` needs enable.partition.eof; a
    TimeoutError follows `idle_timeout` seconds without data."""
    if start != OFFSET_BEGINNING and start >= stop:
        return
    consumer.assign([TopicPartition(topic, partition, start)])
    deadline = time.monotonic() + idle_timeout
    try:
        while True:
            batch = next_batch(consumer)
            if batch:
                deadline = time.monotonic() + idle_timeout
            elif time.monotonic() > deadline:
                raise TimeoutError(f"no data from {topic}-{partition} within {idle_timeout:g}s")
            for message in batch:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        return
                    raise RuntimeError(f"reading {topic}-{partition}: {error.str()}")
                if message.offset() >= stop:
                    return
                yield message
                if message.offset() >= stop - 1:
                    return  # the last wanted record: no need to wait for end-of-partition
    finally:
        consumer.unassign()


def committed_reader(config: dict[str, Any]) -> Consumer:
    """An assign-only read_committed consumer for one finite read (`read_committed_with`), made before the caller knows
    what to read so that it connects meanwhile. One read: after unassign(), librdkafka often holds the next assign() of
    the same consumer for a second."""
    # assign() only, never subscribe() or commit: the group id is required by the client but no group is formed.
    return Consumer(
        {
            **config,
            "group.id": "_kdr.reader",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            # A range ending in a transaction marker is only known read with the end-of-partition event, which comes
            # with the next fetch: the broker holds that fetch this long for data that will not come.
            "fetch.wait.max.ms": 1,
        }
    )


def read_committed(
    config: dict[str, Any],
    ranges: dict[tuple[str, int], tuple[int, int]],
    timeout: float,
    first_only: set[tuple[str, int]] | None = None,
) -> Iterator[Message]:
    """`read_committed_with` a reader of its own, closed at the end."""
    if all(start >= end for start, end in ranges.values()):
        return
    consumer = committed_reader(config)
    try:
        yield from read_committed_with(consumer, ranges, timeout, first_only)
    finally:
        consumer.close()


def _look_up_topics(consumer: Consumer, topics: set[str], deadline: float) -> None:
    """assign() looks up no metadata of topics the consumer does not know yet: once connected (a reader made early),
    librdkafka finds their leaders with its 1 s scan of unavailable topics. Ask for each topic first (one round trip
    each); a failure here only leaves that wait, so the read's own timeout still decides."""
    for topic in sorted(topics):
        try:
            consumer.list_topics(topic, timeout=max(deadline - time.monotonic(), 0.001))
        except KafkaException:
            return


class _RangeRead:
    """The partitions a `read_committed_with` still reads, and the newest transient error for its timeout's line
    (librdkafka retries those itself)."""

    def __init__(self, ranges: dict[tuple[str, int], tuple[int, int]], first_only: set[tuple[str, int]]) -> None:
        self.ranges, self.first_only = ranges, first_only
        self.pending = {key for key, (start, end) in ranges.items() if start < end}
        self.last_error = "no records arrived"

    def wants(self, msg: Message) -> bool:
        """Whether `msg` is a data record to yield; an end of partition or a record past its range ends the
        partition."""
        key, err = (msg.topic(), msg.partition()), msg.error()
        if err is not None:
            if err.fatal():
                raise KafkaException(err)
            if err.code() == KafkaError._PARTITION_EOF:
                self.pending.discard(key)
            else:
                self.last_error = err.str()
            return False
        if key in self.pending and msg.offset() >= self.ranges[key][1]:
            self.pending.discard(key)
        return key in self.pending

    def yielded(self, msg: Message) -> None:
        """A partition is read once its range's last record, or its first for `first_only`, is out."""
        key = (msg.topic(), msg.partition())
        if key in self.first_only or msg.offset() == self.ranges[key][1] - 1:
            self.pending.discard(key)


def read_committed_with(
    consumer: Consumer,
    ranges: dict[tuple[str, int], tuple[int, int]],
    timeout: float,
    first_only: set[tuple[str, int]] | None = None,
) -> Iterator[Message]:
    """Data records of each (topic, partition) in [start, end), read_committed by a `committed_reader`: aborted
    records and transaction markers are skipped by the client. Only the first record for partitions in
    `first_only`. Raises TimeoutError naming the partitions not read to their end within `timeout` seconds."""
    read = _RangeRead(ranges, first_only or set())
    if not read.pending:
        return
    deadline = time.monotonic() + timeout
    _look_up_topics(consumer, {topic for topic, _ in read.pending}, deadline)
    consumer.assign([TopicPartition(t, p, ranges[(t, p)][0]) for t, p in sorted(read.pending)])
    try:
        while read.pending:
            if time.monotonic() > deadline:
                missing = ", ".join(f"{t}[{p}]" for t, p in sorted(read.pending))
                raise TimeoutError(f"{missing} not read to the end within {timeout:g} s ({read.last_error})")
            for msg in next_batch(consumer, 500):
                if read.wants(msg):
                    yield msg
                    read.yielded(msg)
    finally:
        consumer.unassign()
