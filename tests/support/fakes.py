"""Small in-memory fakes of the confluent-kafka objects that the copier, resume, translation, planner, verify and
backfill touch, a module's own sleep (`patch_sleep`), and an alert target's plugin (`FakePlugin`).

They model only what that code relies on: a consumer assigned to partitions delivers their records in offset
order from the assigned offset, skips offset gaps (compaction, transaction markers, aborted records), and, with
enable.partition.eof, sends one _PARTITION_EOF event whose offset is the partition's end once it is read to it.
Each log is what a read_committed consumer sees: `high` is its end (the last stable offset).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_CREATE_TIME,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)

Headers = list[tuple[str, bytes | None]]


class FakeMessage:
    """A record (or an error event when `error` is set), with confluent_kafka.Message's accessors."""

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None = None,
        value: bytes | None = None,
        headers: Headers | None = None,
        timestamp: int = 0,
        error: KafkaError | None = None,
    ) -> None:
        self._topic, self._partition, self._offset = topic, partition, offset
        self._key, self._value, self._headers, self._timestamp, self._error = key, value, headers, timestamp, error

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> Headers | None:
        return self._headers  # the same list on every call, as confluent_kafka caches it

    def timestamp(self) -> tuple[int, int]:
        return TIMESTAMP_CREATE_TIME, self._timestamp

    def error(self) -> KafkaError | None:
        return self._error

    def __repr__(self) -> str:
        return f"FakeMessage({self._topic}-{self._partition}@{self._offset}, error={self._error})"


def eof_event(topic: str, partition: int, offset: int) -> FakeMessage:
    return FakeMessage(topic, partition, offset, error=KafkaError(KafkaError._PARTITION_EOF))


@dataclass
class FakeLog:
    messages: list[FakeMessage]
    low: int
    high: int


class FakeConsumer:
    """An assign-only consumer over in-memory partitions.

    `assignments` records every (topic, partition, offset) assigned, so tests can check where reads started.
    Assigning an offset outside [low, high] fails the test at once (the code under test must not read out of
    range), and so does a caller that keeps polling a partition with nothing left to deliver."""

    MAX_IDLE_POLLS = 1_000

    def __init__(self, partition_eof: bool = True, cluster_id: str = "fakeCluster") -> None:
        self.partition_eof = partition_eof
        self.cluster_id = cluster_id  # what list_topics' metadata names
        self.logs: dict[tuple[str, int], FakeLog] = {}
        self.assignments: list[tuple[str, int, int]] = []
        self._positions: dict[tuple[str, int], int] = {}
        self._eof_sent: set[tuple[str, int]] = set()
        self._idle = 0

    def add(
        self,
        topic: str,
        partition: int,
        messages: Iterable[FakeMessage],
        low: int | None = None,
        high: int | None = None,
    ) -> FakeConsumer:
        """A partition holding `messages` (in offset order); low/high default to the first offset and last + 1."""
        messages = list(messages)
        offsets = [m.offset() for m in messages]
        assert offsets == sorted(set(offsets)), f"offsets must increase: {offsets}"
        assert all((m.topic(), m.partition()) == (topic, partition) for m in messages)
        low = (offsets[0] if offsets else 0) if low is None else low
        high = (offsets[-1] + 1 if offsets else low) if high is None else high
        assert low <= high and all(low <= o < high for o in offsets), (low, high, offsets)
        self.logs[(topic, partition)] = FakeLog(messages, low, high)
        return self

    def _log(self, topic: str, partition: int) -> FakeLog:
        if (topic, partition) not in self.logs:
            raise KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
        return self.logs[(topic, partition)]

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> SimpleNamespace:
        """The cluster's metadata, as far as the code under test reads it: its id."""
        return SimpleNamespace(cluster_id=self.cluster_id)

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float | None = None, cached: bool = False
    ) -> tuple[int, int]:
        log = self._log(partition.topic, partition.partition)
        return log.low, log.high

    def assign(self, partitions: list[TopicPartition]) -> None:
        self._positions.clear()
        self._eof_sent.clear()
        for tp in partitions:
            log = self._log(tp.topic, tp.partition)
            offset = {OFFSET_BEGINNING: log.low, OFFSET_END: log.high}.get(tp.offset, tp.offset)
            assert log.low <= offset <= log.high, f"{tp.topic}-{tp.partition}: offset {tp.offset} out of range"
            self._positions[(tp.topic, tp.partition)] = offset
            self.assignments.append((tp.topic, tp.partition, offset))

    def unassign(self) -> None:
        self._positions.clear()

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[FakeMessage]:
        batch: list[FakeMessage] = []
        for key, position in self._positions.items():
            log = self.logs[key]
            pending = [m for m in log.messages if m.offset() >= position]
            taken = pending[: num_messages - len(batch)]
            batch.extend(taken)
            if taken:
                position = taken[-1].offset() + 1
            if len(taken) == len(pending):
                position = max(position, log.high)  # read past trailing markers to the end
                if self.partition_eof and key not in self._eof_sent and len(batch) < num_messages:
                    batch.append(eof_event(*key, log.high))
                    self._eof_sent.add(key)
            self._positions[key] = position
            if len(batch) >= num_messages:
                break
        self._idle = 0 if batch else self._idle + 1
        assert self._idle <= self.MAX_IDLE_POLLS, "polled a consumer with nothing left to deliver"
        return batch

    def poll(self, timeout: float | None = None) -> FakeMessage | None:
        batch = self.consume(1)
        return batch[0] if batch else None

    def offsets_for_times(self, partitions: list[TopicPartition], timeout: float | None = None) -> list[TopicPartition]:
        """Per partition, the first offset whose timestamp is >= the one asked for, else -1."""
        found = []
        for tp in partitions:
            log = self._log(tp.topic, tp.partition)
            offset = next((m.offset() for m in log.messages if m.timestamp()[1] >= tp.offset), -1)
            found.append(TopicPartition(tp.topic, tp.partition, offset))
        return found

    def close(self) -> None:
        self.unassign()


@dataclass
class Produced:
    topic: str
    key: bytes | None
    value: bytes | None
    headers: Headers | None
    partition: int
    timestamp: int
    on_delivery: Any = field(default=None, repr=False)


class FakeProducer:
    """Records produce() calls (headers copied, as the client serialises them at the call). Its parameters come in
    confluent-kafka's order, for callers that pass them by position."""

    def __init__(self) -> None:
        self.produced: list[Produced] = []

    def produce(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        partition: int = -1,
        on_delivery: Any = None,
        callback: Any = None,
        timestamp: int = 0,
        headers: Headers | None = None,
    ) -> None:
        self.produced.append(
            Produced(
                topic,
                key,
                value,
                None if headers is None else list(headers),
                partition,
                timestamp,
                on_delivery or callback,
            )
        )

    def poll(self, timeout: float = 0) -> int:
        return 0

    def flush(self, timeout: float | None = None) -> int:
        return 0


def _done(result: Any = None, error: KafkaError | None = None) -> Future:
    future: Future = Future()
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(KafkaException(error))
    return future


class FakeGroupAdmin:
    """An AdminClient's consumer-group calls over in-memory groups, answered at once as futures.

    `committed` holds what each group committed (TopicPartitions, with the offsets below 0 or errors a broker may
    answer); `members` each group's active members in this cluster (describing a group not there fails with
    GROUP_ID_NOT_FOUND, as for a group the cluster does not know); `refuse` makes a group's commit fail with that
    error; `partition_errors` answers a group's next commits with that error on every partition, one answer per
    commit, as a broker does whose coordinator loads or moves; `loading` answers a group's next DescribeGroups that many
    times with `busy` (NOT_COORDINATOR unless set). `commits` records the commits made, `asked` the calls in their
    order, `describe_timeouts` each DescribeGroups' request timeout. With `latency` (seconds) each answer comes that
    long after its request, from a thread of its own, as a broker's does; `most_in_flight` is then the most requests
    ever sent and not yet answered."""

    def __init__(self) -> None:
        self.committed: dict[str, list[Any]] = {}  # TopicPartition-like: topic, partition, offset, error
        self.members: dict[str, int] = {}
        self.refuse: dict[str, KafkaError] = {}
        self.partition_errors: dict[str, list[KafkaError]] = {}
        self.loading: dict[str, int] = {}
        self.busy = KafkaError(KafkaError.NOT_COORDINATOR)
        self.asked: list[tuple[str, str]] = []
        self.describe_timeouts: list[float | None] = []
        self.commits: list[tuple[str, list[TopicPartition]]] = []
        self.latency: float | None = None
        self.in_flight = self.most_in_flight = 0
        self._lock = threading.Lock()

    def _later(self, answers: dict[str, Future]) -> dict[str, Future]:
        """`answers` (done) as futures answered `latency` seconds from now; at once without one."""
        if self.latency is None:
            return answers
        with self._lock:
            self.in_flight += len(answers)
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        pending = {group: Future() for group in answers}

        def answer() -> None:
            for group, done in answers.items():
                with self._lock:
                    self.in_flight -= 1
                if done.exception() is None:
                    pending[group].set_result(done.result())
                else:
                    pending[group].set_exception(done.exception())

        threading.Timer(self.latency, answer).start()
        return pending

    def list_consumer_groups(self, request_timeout: float | None = None) -> Future:
        groups = sorted({*self.committed, *self.members})
        return _done(SimpleNamespace(valid=[SimpleNamespace(group_id=g) for g in groups], errors=[]))

    def list_consumer_group_offsets(
        self, requests: list[ConsumerGroupTopicPartitions], request_timeout: float | None = None
    ) -> dict[str, Future]:
        (request,) = requests  # as confluent-kafka: one group a call
        self.asked.append(("list", request.group_id))
        return self._later(
            {
                request.group_id: _done(
                    ConsumerGroupTopicPartitions(request.group_id, self.committed.get(request.group_id, []))
                )
            }
        )

    def describe_consumer_groups(self, groups: list[str], request_timeout: float | None = None) -> dict[str, Future]:
        self.asked += [("describe", group) for group in groups]
        self.describe_timeouts.append(request_timeout)
        loading = {group for group in groups if self.loading.get(group, 0) > 0}
        for group in loading:
            self.loading[group] -= 1
        return self._later(
            {group: _done(error=self.busy) for group in loading}
            | {
                group: _done(SimpleNamespace(group_id=group, members=[object()] * self.members[group]))
                if group in self.members
                else _done(error=KafkaError(KafkaError.GROUP_ID_NOT_FOUND))
                for group in groups
                if group not in loading
            }
        )

    def alter_consumer_group_offsets(
        self, requests: list[ConsumerGroupTopicPartitions], request_timeout: float | None = None
    ) -> dict[str, Future]:
        (request,) = requests
        group = request.group_id
        if group in self.refuse:
            return {group: _done(error=self.refuse[group])}
        if self.partition_errors.get(group):
            error = self.partition_errors[group].pop(0)
            answered = [
                SimpleNamespace(topic=tp.topic, partition=tp.partition, error=error) for tp in request.topic_partitions
            ]
            return {group: _done(SimpleNamespace(group_id=group, topic_partitions=answered))}
        self.commits.append((group, list(request.topic_partitions)))
        return self._later({group: _done(request)})


def patch_sleep(monkeypatch: Any, module: Any, sleep: Callable[[float], None]) -> None:
    """`sleep` as `time.sleep` for `module` alone: its `time` name becomes a copy of the time module with that sleep.
    Patching `time.sleep` itself would hand the fake to every thread of the worker too (py4j's finalizer of the
    session's Spark context sleeps in a loop: with a fake that returns at once, it spins and fills the list)."""
    clock = SimpleNamespace(**{name: getattr(time, name) for name in dir(time) if not name.startswith("_")})
    clock.sleep = sleep
    monkeypatch.setattr(module, "time", clock)


class FakePlugin:
    """An Apprise plugin that records what it was asked to send (title, type) and answers `accept`."""

    def __init__(self, accept: bool = True) -> None:
        self.accept, self.sent = accept, []

    def notify(self, body: str, title: str, notify_type: str) -> bool:
        self.sent.append((title, notify_type))
        return self.accept
