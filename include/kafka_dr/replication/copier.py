"""Copy planned offset ranges of source partitions into the destination (runs in a Spark task).

Keys, values (null included), headers and the CreateTime timestamp are copied unchanged into the
same partition, with one provenance hop appended; records that the cycle rule blocks, or that
fall outside a requested time range, are counted as filtered. The source is read with
read_committed, so aborted records and transaction markers are never copied.

A task copies a group of ranges with one consumer assigned to all of them. A bounded range ends at
its planned end offset; an open range (continuous mode) keeps its partition assigned and copies
records as they arrive until the task's run time is over, so a record waits for no job launch.

No gap, no duplicate, and never two writers: each destination partition is written by its writer
slot's transactional producer (fencing.py). Opening it fences out any older replicator of the flow,
on any host; the task then takes over from what the destination holds (a copy committed by another
writer since the planned position moves the start), and copies are committed in transactions, with
their progress records (`_kdr.progress`) inside the same transaction. A crash or a
fence aborts the open transaction, so the destination only ever holds a prefix of what was read,
and the next run resumes from the destination (resume.py). Consumers of copies must read with
isolation.level=read_committed (librdkafka's default) to skip aborted ones. The source consumer
group named after the flow is committed for lag tools only.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from ..clients import AWAY_FOR_NOW, STALE_METADATA, end_offsets, init_transactions, next_batch
from .fencing import is_fenced, transactional_id, writer_slot
from .internal import PROGRESS, partition_key
from .provenance import HEADER, ForceCopy, blocked, hop_prefix, hops
from .resume import Progress, last_copy

log = logging.getLogger(__name__)

STALL_TIMEOUT_S = 60.0  # no data and no end-of-partition for this long: the source is unreachable
STABLE_TIMEOUT_S = 60.0  # longest wait for another producer's open transaction in a destination partition
TRANSACTION_TIMEOUT_MS = 60_000  # the target aborts a writer's transaction left open this long (a crash)
BOUNDED_COMMIT_INTERVAL_S = 5.0  # bounded copies: longest a transaction stays open
# How long a writer lets a batch fill: Kafka's default (5 ms) while any range is open, since a record's latency counts;
# 20 ms for bounded copies, whose copies become visible at a commit anyway: fewer, larger produce requests, a fifth
# to a third less of the target broker's CPU per record on Apache Kafka (docs/benchmarks.md).
LINGER_MS = 5
BOUNDED_LINGER_MS = 20
SOURCE_COMMIT_WAIT_S = 3.0  # the end of a range: longest wait for the source group's commit
VISIBLE_WAIT_S = 10.0  # the end of a range: longest wait for its commit's markers
TARGET_WAIT_S = 120.0  # a target away: longest wait for its high watermark (a transaction's commit waits as long)


class CopyError(RuntimeError):
    """A range could not be copied; nothing past the last progress record was recorded as done."""


class FencedError(CopyError):
    """A newer writer of the same slot took over: this one must not write again."""


@dataclass(frozen=True)
class CopyTask:
    flow: str
    source_config: dict[str, Any]
    target_config: dict[str, Any]
    source_cluster: str  # topology names, for messages
    target_cluster: str
    source_cluster_id: str
    target_cluster_id: str
    topic: str
    partition: int
    dest_topic: str
    start: int
    end: int | None  # exclusive, at most the read_committed end when planned; None: open (continuous)
    provenance: bool = True
    force: ForceCopy | None = None
    from_ms: int | None = None  # copy only records with from_ms <= timestamp < to_ms
    to_ms: int | None = None
    progress_every: int = 50_000  # copies of one partition between durable progress records
    dest_from: int = 0  # destination offset from which copies past `start` would lie (what its round read to)


@dataclass
class CopyResult:
    topic: str
    partition: int
    dest_topic: str
    start: int
    next: int
    records: int = 0
    bytes: int = 0
    filtered: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    seconds: float = 0.0
    dest_end: int = 0  # destination committed end when the task finished: where the next take-over looks from

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Clients:
    consumer: Consumer  # source, read_committed, group = flow name
    target: Consumer  # target, read_uncommitted: high watermarks
    reader: Consumer  # target, read_committed: what other writers committed
    admin: AdminClient  # target: end offsets of many partitions in one request
    errors: list[KafkaError] = field(default_factory=list)

    def failed(self, err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            self.errors.append(err)


_CLIENTS: dict[str, _Clients] = {}


def _clients(flow: str, source_config: dict[str, Any], target_config: dict[str, Any]) -> _Clients:
    """Clients cached per Python worker and flow: continuous epochs reuse their connections. Writers are
    not cached: any worker may run any slot next, and a cached writer would be fenced by its own twin."""
    key = json.dumps([flow, source_config, target_config], sort_keys=True, default=str)
    if key not in _CLIENTS:
        consumer = Consumer(
            {
                **source_config,
                "group.id": flow,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "auto.offset.reset": "error",
                "fetch.max.bytes": 52_428_800,
                "max.partition.fetch.bytes": 10_485_760,
                "queued.max.messages.kbytes": 262_144,
                "fetch.wait.max.ms": 100,
                "on_commit": _commit_failed,
            }
        )
        target = Consumer({**target_config, "group.id": f"{flow}-watermarks", "isolation.level": "read_uncommitted"})
        reader = Consumer(
            {
                **target_config,
                "group.id": f"{flow}-takeover",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 10,
            }
        )
        _CLIENTS[key] = _Clients(consumer, target, reader, AdminClient(target_config))
    return _CLIENTS[key]


def open_clients(flow: str, source_config: dict[str, Any], target_config: dict[str, Any], _task: Any = None) -> None:
    """Open this worker's clients for `flow` and connect them, ahead of its copy tasks (a warm-up Spark
    job while the driver plans), so that worker start-up and connections are ready when copying starts."""
    clients = _clients(flow, source_config, target_config)
    for client in (clients.consumer, clients.target, clients.reader, clients.admin):
        client.list_topics(timeout=10)


def _commit_failed(err: KafkaError | None, _partitions: list[TopicPartition]) -> None:
    if err is not None:
        log.warning("flow group commit failed (the next progress record commits again): %s", err.str())


def close_clients() -> None:
    """Close the cached clients (in-process callers; Spark workers simply exit)."""
    while _CLIENTS:
        clients = _CLIENTS.popitem()[1]
        for consumer in (clients.consumer, clients.target, clients.reader):
            consumer.close()


@dataclass
class _Writer:
    """The transactional producer of one writer slot; `dirty` while its open transaction holds records."""

    slot: int
    producer: Producer
    dirty: bool = False


@dataclass
class _Partition:
    """Where the copy of one range stands inside a task."""

    task: CopyTask
    result: CopyResult
    prefix: bytes  # provenance hop up to the origin offset
    writer: _Writer
    position: int  # next source offset to copy
    recorded: int  # position of the last durable progress record
    since_progress: int = 0  # copies since that record

    @classmethod
    def of(cls, task: CopyTask, writer: _Writer) -> _Partition:
        """A range at its planned start, nothing copied yet."""
        result = CopyResult(task.topic, task.partition, task.dest_topic, task.start, task.start)
        return cls(
            task, result, hop_prefix(task.source_cluster_id, task.topic, task.partition), writer, task.start, task.start
        )

    @property
    def done(self) -> bool:
        return self.task.end is not None and self.position >= self.task.end


def copy_ranges(
    tasks: Iterable[CopyTask],
    run_for: float | None = None,
    progress_interval: float | None = None,
    commit_interval: float = BOUNDED_COMMIT_INTERVAL_S,
    ended: Callable[[], bool] | None = None,
) -> list[CopyResult]:
    """Copy a group of ranges of one flow. Bounded ranges end at their end offset; open ranges are
    copied for `run_for` seconds, or until `ended()` says the driver ended the epoch (epoch_end.py), asked
    between batches. Copies become visible (their transaction commits) every `commit_interval` seconds;
    progress is recorded every `progress_every` copies of a partition, every `progress_interval` seconds if
    given, and at the end."""
    tasks = list(tasks)
    if not tasks:
        return []
    first = tasks[0]
    clients = _clients(first.flow, first.source_config, first.target_config)
    clients.errors.clear()
    linger_ms = BOUNDED_LINGER_MS if all(t.end is not None for t in tasks) else LINGER_MS
    writers = _open_writers(first, {writer_slot(t.topic, t.partition) for t in tasks}, linger_ms)
    parts = [_Partition.of(t, writers[writer_slot(t.topic, t.partition)]) for t in tasks]
    cadence = _Cadence(time.monotonic(), run_for, progress_interval, commit_interval)
    try:
        _take_over(parts, clients)
        _copy_until_done(parts, clients, writers, cadence, ended)
        _finish(parts, clients, writers)
    except BaseException as exc:
        for writer in writers.values():
            _abort(writer)  # lets read_committed consumers go past it now, not at the transaction timeout
        if isinstance(exc, KafkaException) and is_fenced(exc.args[0]):
            # Whichever call met the newer writer first (librdkafka reports it from several), the same one line:
            # the replicator's driver tells a fenced task from a failed one by it.
            raise _write_error(first, exc.args[0]) from None
        raise
    finally:
        clients.consumer.unassign()
    seconds = round(time.monotonic() - cadence.started, 3)
    for p in parts:
        p.result.seconds = seconds
    return [p.result for p in parts]


@dataclass
class _Cadence:
    """When a task's copying ends (`run_for` seconds after `started`), when its progress and its commits come due,
    and how long its source has been silent."""

    started: float
    run_for: float | None
    progress_interval: float | None
    commit_interval: float
    next_progress: float | None = field(init=False)
    next_commit: float = field(init=False)
    last_data: float = field(init=False)  # the latest batch that held anything (records or end-of-partition events)

    def __post_init__(self) -> None:
        self.next_progress = None if self.progress_interval is None else self.started + self.progress_interval
        self.next_commit = self.started + self.commit_interval
        self.last_data = self.started

    def running(self) -> bool:
        return self.run_for is None or time.monotonic() < self.started + self.run_for

    def silent_for(self, now: float, batch: list[Message]) -> float:
        if batch:
            self.last_data = now
        return now - self.last_data

    def progress_due(self, now: float) -> bool:
        """Whether the progress interval is over (the next one starts now)."""
        if self.next_progress is None or self.progress_interval is None or now < self.next_progress:
            return False
        self.next_progress = now + self.progress_interval
        return True

    def commit_due(self, now: float) -> bool:
        return now >= self.next_commit

    def committed(self, now: float) -> None:
        self.next_commit = now + self.commit_interval


def _copy_until_done(
    parts: list[_Partition],
    clients: _Clients,
    writers: dict[int, _Writer],
    cadence: _Cadence,
    ended: Callable[[], bool] | None,
) -> None:
    """Copy the ranges not done yet, batch after batch, until they all end, the run time is over or the driver
    ends the epoch; durable progress and commits as they come due."""
    consumer = clients.consumer
    active = {(p.task.topic, p.task.partition): p for p in parts if not p.done}
    consumer.assign([TopicPartition(t, n, p.position) for (t, n), p in active.items()])
    while active and cadence.running() and not (ended and ended()):
        messages = next_batch(consumer)
        for writer in writers.values():
            writer.producer.poll(0)  # serve delivery failures while copying
        now = time.monotonic()
        _check_source(cadence.silent_for(now, messages), active)
        _copy(messages, active, clients.failed)
        finished = [key for key, p in active.items() if p.done]
        if finished:
            consumer.incremental_unassign([TopicPartition(*key) for key in finished])
            for key in finished:
                del active[key]
        _record_or_commit(now, cadence, parts, active, clients, writers)


def _check_source(silent: float, active: dict[tuple[str, int], _Partition]) -> None:
    """A source silent (no data, no end-of-partition) for STALL_TIMEOUT_S while a bounded range is left to copy
    is unreachable: an open range just waits for records."""
    if silent <= STALL_TIMEOUT_S:
        return
    bounded = next((p for p in active.values() if p.task.end is not None), None)
    if bounded is not None:
        raise CopyError(
            f"source {bounded.task.source_cluster} unreachable: no data for {STALL_TIMEOUT_S:.0f}s "
            f"while copying {bounded.task.topic}-{bounded.task.partition} at offset {bounded.position}"
        )


def _record_or_commit(
    now: float,
    cadence: _Cadence,
    parts: list[_Partition],
    active: dict[tuple[str, int], _Partition],
    clients: _Clients,
    writers: dict[int, _Writer],
) -> None:
    """Durable progress when it is due (`progress_every` copies of a partition, or the progress interval over);
    else the open transactions commit once the commit interval is over."""
    timed = cadence.progress_due(now)
    if timed or any(p.since_progress >= p.task.progress_every for p in active.values()):
        _record_progress(clients, parts, writers, final=False)
        cadence.committed(now)
    elif cadence.commit_due(now):
        _commit(clients, writers.values(), parts[0].task)
        cadence.committed(now)


def _finish(parts: list[_Partition], clients: _Clients, writers: dict[int, _Writer]) -> None:
    """The last progress records, and the destination's committed ends after them: where the next take-over of
    each range looks from."""
    _record_progress(clients, parts, writers, final=True)
    dests = [(p.task.dest_topic, p.task.partition) for p in parts]
    ends = end_offsets(clients.admin, dests, IsolationLevel.READ_COMMITTED)
    for p in parts:
        p.result.dest_end = ends[(p.task.dest_topic, p.task.partition)]


def _open_writers(task: CopyTask, slots: set[int], linger_ms: int) -> dict[int, _Writer]:
    """One transactional producer per slot, initialised together: initialising fences every older writer
    of the slot (another replicator of the flow, a zombie) and aborts its open transaction."""
    writers = {
        slot: _Writer(
            slot,
            Producer(
                {
                    **task.target_config,
                    "transactional.id": transactional_id(task.flow, slot),
                    "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
                    "acks": "all",
                    "linger.ms": linger_ms,
                    "batch.size": 1_000_000,
                    "batch.num.messages": 10_000,
                    "delivery.report.only.error": True,
                    "queue.buffering.max.messages": 500_000,
                    "queue.buffering.max.kbytes": 1_048_576,
                }
            ),
        )
        for slot in sorted(slots)
    }
    _in_parallel([lambda w=w: init_transactions(w.producer) for w in writers.values()], task)
    for writer in writers.values():
        _transactional(writer.producer.begin_transaction, task)
    return writers


def _take_over(parts: list[_Partition], clients: _Clients) -> None:
    """After the fence: copies that another writer committed past a partition's planned start (a replicator of
    the same flow racing this one) move the start past them, so none is copied twice. Another producer's open
    transaction could hide such copies from read_committed, so wait until none is open."""
    keys = [(p.task.dest_topic, p.task.partition) for p in parts]
    task = parts[0].task
    high = end_offsets(clients.admin, keys, IsolationLevel.READ_UNCOMMITTED)
    deadline = time.monotonic() + STABLE_TIMEOUT_S
    while True:
        stable = end_offsets(clients.admin, keys, IsolationLevel.READ_COMMITTED)
        open_txns = [key for key in keys if stable[key] < high[key]]
        if not open_txns:
            break
        if time.monotonic() > deadline:
            topic, partition = open_txns[0]
            raise CopyError(
                f"{task.target_cluster}:{topic}-{partition}: a transaction has stayed open for "
                f"{STABLE_TIMEOUT_S:.0f}s (stable offset {stable[open_txns[0]]} < end "
                f"{high[open_txns[0]]}); cannot tell what flow {task.flow} already copied"
            )
        time.sleep(0.05)
    for p in parts:
        key = (p.task.dest_topic, p.task.partition)
        if stable[key] <= p.task.dest_from:
            continue
        last = last_copy(
            clients.reader,
            p.task.dest_topic,
            p.task.partition,
            p.task.dest_from,
            stable[key],
            (p.task.source_cluster_id, p.task.topic, p.task.partition),
            timeout=30,
        )
        if last is not None and last >= p.position:
            log.warning(
                "flow %s: %s-%d was copied up to offset %d by another writer of this flow, now fenced out; "
                "continuing from there",
                p.task.flow,
                p.task.topic,
                p.task.partition,
                last,
            )
            p.position = last + 1


def _copy(messages: list[Message], active: dict[tuple[str, int], _Partition], callback) -> None:
    """Copy one fetched batch into the ranges it belongs to (end-of-partition events move positions). The hot path:
    a batch holds runs of one partition's records, and each run is copied in one pass (_copy_run), so that per
    record only what differs is done."""
    copied_at = b",%d" % int(time.time() * 1000)  # one copy time per fetched batch
    for run in _runs(messages):
        owner = active.get((run[0].topic(), run[0].partition()))
        if owner is None or owner.done:
            _skip(run, owner)
        else:
            _copy_run(owner, run, callback, copied_at)


def _runs(messages: list[Message]) -> Iterator[list[Message]]:
    """The batch's runs of consecutive messages of one partition, in order."""
    start, topic, partition = 0, None, -1
    for i, message in enumerate(messages):
        if message.partition() != partition or message.topic() != topic:
            if i > start:
                yield messages[start:i]
            start, topic, partition = i, message.topic(), message.partition()
    if start < len(messages):
        yield messages[start:]


def _skip(run: list[Message], owner: _Partition | None) -> None:
    """A run that no range takes: records fetched before their range ended and it was unassigned. A read error in
    it still fails the copy; the end-of-partition event of a known range does not."""
    for message in run:
        error = message.error()
        if error is not None and (owner is None or error.code() != KafkaError._PARTITION_EOF):
            source = owner.task.source_cluster if owner else "source"
            raise CopyError(f"reading {source}:{message.topic()}-{message.partition()}: {error.str()}")


def _copy_run(part: _Partition, run: list[Message], callback, copied_at: bytes) -> None:
    """Copy a run of one partition's records into its range: the range's settings are read at the run's start and
    its counters settled at its end (_settle)."""
    task = part.task
    end, position, dest, partition = task.end, part.position, task.dest_topic, task.partition
    prefix = part.prefix if task.provenance else None
    from_ms, to_ms = task.from_ms, task.to_ms  # copied: from_ms <= timestamp < to_ms
    produce = part.writer.producer.produce
    copied = size = filtered = 0
    first_offset = last_offset = None
    try:
        for message in run:
            offset = message.offset()
            if message.error() is not None:
                position = _event_position(message, task, position)
                continue
            if end is not None and offset >= end:
                position = end
                continue
            position = offset + 1
            headers = message.headers() or []
            timestamp = message.timestamp()[1]
            if (
                (headers and _blocked(headers, task, offset, timestamp))
                or (from_ms is not None and timestamp < from_ms)
                or (to_ms is not None and timestamp >= to_ms)
            ):
                filtered += 1
                continue
            if prefix is not None:
                headers.append((HEADER, b"%s%d%s" % (prefix, offset, copied_at)))
            value, key = message.value(), message.key()
            try:
                # Positional (topic, value, key, partition, on_delivery, its alias callback, timestamp, headers):
                # confluent-kafka's keyword parsing costs about 1 us a call, a fifth of a record's copy.
                produce(dest, value, key, partition, callback, None, timestamp, headers)
            except (BufferError, KafkaException):  # a full queue, or a partition the producer does not know yet
                _produce(part.writer, task, key, value, headers, timestamp, callback)
            if first_offset is None:
                first_offset = offset
            last_offset = offset
            copied += 1
            size += len(value or b"") + len(key or b"")
    finally:
        _settle(part, position, copied, size, filtered, first_offset, last_offset)


def _event_position(message: Message, task: CopyTask, position: int) -> int:
    """The position after an error event of the range's partition: an end-of-partition event moves it to the
    partition's end (at most the range's); any other error fails the copy."""
    error = message.error()
    if error.code() != KafkaError._PARTITION_EOF:
        raise CopyError(f"reading {task.source_cluster}:{task.topic}-{task.partition}: {error.str()}")
    offset = message.offset()
    return max(position, offset if task.end is None else min(offset, task.end))


def _blocked(headers: list, task: CopyTask, offset: int, timestamp: int) -> bool:
    """Whether the record's provenance says the cycle rule keeps it from the destination (provenance.py)."""
    try:
        chain = hops(headers)
    except ValueError as exc:
        raise CopyError(f"{task.source_cluster}:{task.topic}-{task.partition} offset {offset}: {exc}") from None
    return bool(chain) and blocked(chain, task.target_cluster_id, task.dest_topic, timestamp, task.force)


def _settle(
    part: _Partition,
    position: int,
    copied: int,
    size: int,
    filtered: int,
    first_offset: int | None,
    last_offset: int | None,
) -> None:
    """Add what one run of a partition's records did to its range."""
    part.position = position
    result = part.result
    result.filtered += filtered
    if copied:
        part.writer.dirty = True
        if result.first_offset is None:
            result.first_offset = first_offset
        result.last_offset = last_offset
        result.records += copied
        result.bytes += size
        part.since_progress += copied


def _produce(writer: _Writer, task: CopyTask, key, value, headers, timestamp: int, callback) -> None:
    """Produce one copy through what the hot path does not handle: a full queue, a new destination partition."""
    writer.dirty = True
    refreshed = False
    while True:
        try:
            writer.producer.produce(
                task.dest_topic,
                value=value,
                key=key,
                headers=headers,
                partition=task.partition,
                timestamp=timestamp,
                on_delivery=callback,
            )
            return
        except BufferError:
            writer.producer.poll(0.05)
        except KafkaException as exc:
            # A destination partition added since this producer last refreshed its metadata (a source
            # partition increase a copy round propagated): refresh once, then retry.
            if exc.args[0].code() != KafkaError._UNKNOWN_PARTITION or refreshed:
                raise _write_error(task, exc.args[0]) from None
            writer.producer.list_topics(task.dest_topic, timeout=10)
            refreshed = True


def _record_progress(clients: _Clients, parts: list[_Partition], writers: dict[int, _Writer], final: bool) -> None:
    """Record every copy so far for each partition that moved, in the transaction of its copies: its
    `_kdr.progress` record; commit; then the flow's consumer group on the source (for lag tools only, so it is
    committed without waiting except at the end: a commit queues behind the consumer's pending fetch; and then for
    SOURCE_COMMIT_WAIT_S at most, see _await_source_commit).

    The destination high watermark after the flush bounds every later copy from below, so it is where a
    resume searches from (resume.py)."""
    moved = [p for p in parts if p.position > p.recorded]
    if not moved:
        _commit(clients, writers.values(), parts[0].task)
        return
    task = moved[0].task
    moved_writers = {p.writer.slot: p.writer for p in moved}.values()
    _in_parallel([lambda w=w: _flush(w.producer, clients, task) for w in moved_writers], task)
    ends: dict[tuple[str, int], int] = {}  # destination partition: its high watermark, all copies flushed
    for p in moved:
        task = p.task
        end = ends[(task.dest_topic, task.partition)] = _dest_end(task, clients)
        progress = Progress(p.position, task.dest_topic, end, task.source_cluster_id)
        p.writer.dirty = True
        produce = functools.partial(  # a fenced producer raises here too: the same one-line FencedError
            p.writer.producer.produce,
            PROGRESS,
            key=partition_key(task.flow, task.topic, task.partition),
            value=progress.to_json(),
            on_delivery=clients.failed,
        )
        _transactional(produce, task)
    _commit(clients, writers.values(), task)
    offsets = [TopicPartition(p.task.topic, p.task.partition, p.position) for p in moved]
    clients.consumer.commit(offsets=offsets, asynchronous=True)
    if final:
        _await_visible(clients.admin, ends, task)
        _await_source_commit(clients.consumer, offsets, task)
    for p in moved:
        p.result.next = p.recorded = p.position
        p.since_progress = 0


def _await_visible(admin: AdminClient, ends: dict[tuple[str, int], int], task: CopyTask) -> None:
    """Until the destination's read_committed ends (last stable offsets, all partitions in one request) reach `ends`
    (its high watermarks before the commit), for VISIBLE_WAIT_S at most. Apache Kafka writes a commit's markers into
    the partitions after EndTxn returns: a translation run right after a bounded copy (a failback's, a test's) would
    otherwise find its last transaction's copies missing and resume groups before them."""
    deadline = time.monotonic() + VISIBLE_WAIT_S
    pending = dict(ends)
    while pending and (left := deadline - time.monotonic()) > 0:
        try:
            stable = end_offsets(admin, sorted(pending), IsolationLevel.READ_COMMITTED, left)
        except KafkaException as exc:
            log.warning("flow %s: visibility of its copies not confirmed: %s", task.flow, exc.args[0].str())
            return
        pending = {key: end for key, end in pending.items() if stable[key] < end}
        if pending:
            time.sleep(0.01)
    if pending:
        log.warning("flow %s: copies not visible to read_committed readers within %g s", task.flow, VISIBLE_WAIT_S)


def _await_source_commit(consumer: Consumer, offsets: list[TopicPartition], task: CopyTask) -> None:
    """Until the source group holds `offsets` (lag tools read it right after a bounded run), for SOURCE_COMMIT_WAIT_S
    at most: a synchronous commit to a source that a disaster took waits for its coordinator forever, so the task, its
    epoch and the replicator's stop would hang on the lost cluster. The durable progress is in the target already."""
    wanted = {(tp.topic, tp.partition): tp.offset for tp in offsets}
    deadline = time.monotonic() + SOURCE_COMMIT_WAIT_S
    while (left := deadline - time.monotonic()) > 0:
        try:
            held = consumer.committed([TopicPartition(t, p) for t, p in wanted], timeout=left)
        except KafkaException as exc:
            log.warning("flow %s: source group commit not confirmed: %s", task.flow, exc.args[0].str())
            return
        if all(tp.offset >= wanted[(tp.topic, tp.partition)] for tp in held):
            return
        time.sleep(0.02)
    log.warning("flow %s: source group commit not confirmed within %g s", task.flow, SOURCE_COMMIT_WAIT_S)


def _commit(clients: _Clients, writers: Iterable[_Writer], task: CopyTask) -> None:
    """Commit the open transaction of every writer that holds records, and open the next one."""
    dirty = [w for w in writers if w.dirty]
    _in_parallel([lambda w=w: w.producer.commit_transaction(120) for w in dirty], task)
    if clients.errors:
        raise _write_error(task, clients.errors[0])
    for writer in dirty:
        writer.dirty = False
        _transactional(writer.producer.begin_transaction, task)


def _abort(writer: _Writer) -> None:
    with contextlib.suppress(KafkaException):  # fenced, or the target is gone: it times out on its own
        writer.producer.abort_transaction(5)


def _in_parallel(calls: list[Callable[[], Any]], task: CopyTask) -> None:
    """Run blocking client calls (they release the GIL) side by side; one raises, they all stop."""
    if len(calls) == 1:
        _transactional(calls[0], task)
        return
    with ThreadPoolExecutor(max_workers=max(1, len(calls))) as pool:
        for future in [pool.submit(_transactional, call, task) for call in calls]:
            future.result()


def _transactional(call: Callable[[], Any], task: CopyTask) -> Any:
    try:
        return call()
    except KafkaException as exc:
        raise _write_error(task, exc.args[0]) from None


def _write_error(task: CopyTask, error: KafkaError) -> CopyError:
    if is_fenced(error):
        return FencedError(
            f"flow {task.flow}: fenced out of {task.target_cluster} by a newer replicator of this flow; this one stops"
        )
    return CopyError(f"writing to {task.target_cluster}: {error.str()}")


def _dest_end(task: CopyTask, clients: _Clients) -> int:
    """The destination partition's high watermark, all copies flushed. A target away for a moment (a node killed and
    started again) or whose metadata changed (a partition added since the last refresh, a leader moved) is asked again
    after a metadata refresh, for TARGET_WAIT_S: a continuous replicator lives through a target's outage, as its
    transactions' commits do."""
    tp = TopicPartition(task.dest_topic, task.partition)
    deadline = time.monotonic() + TARGET_WAIT_S
    first = True
    while True:
        try:
            return clients.target.get_watermark_offsets(tp, timeout=max(1.0, min(30.0, deadline - time.monotonic())))[1]
        except KafkaException as exc:
            if exc.args[0].code() not in (*STALE_METADATA, *AWAY_FOR_NOW) or time.monotonic() >= deadline:
                raise
            if first:
                log.warning("flow %s: %s away (%s): asking again", task.flow, task.target_cluster, exc.args[0].str())
            first = False
        time.sleep(0.2)
        with contextlib.suppress(KafkaException):
            clients.target.list_topics(task.dest_topic, timeout=10)


def _flush(producer: Producer, clients: _Clients, task: CopyTask) -> None:
    remaining = producer.flush(120)
    if remaining:
        raise CopyError(f"target {task.target_cluster} did not acknowledge {remaining} records within 120 s")
    if clients.errors:
        raise _write_error(task, clients.errors[0])
