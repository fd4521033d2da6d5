"""The copier's per-record work on a fetched batch (`_copy`): cycle-rule and time-range filtering, the
provenance hop it appends, and how records and end-of-partition events move a range's position."""

from __future__ import annotations

import json
import time
import types
from concurrent.futures import Future

import pytest
from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition
from support.fakes import FakeMessage, FakeProducer, eof_event

from kafka_dr.replication import copier
from kafka_dr.replication.copier import CopyError, CopyResult, CopyTask, _copy, _Partition, _Writer
from kafka_dr.replication.internal import PROGRESS
from kafka_dr.replication.provenance import HEADER, ForceCopy, Hop, hop_prefix

SRC, DST = "srcCluster", "dstCluster"
TOPIC, PARTITION, DEST = "orders", 3, "dc1.orders"
NOW_MS = 1_700_000_000_500  # the copy time written in every hop of these tests


@pytest.fixture(autouse=True)
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = types.SimpleNamespace(time=lambda: NOW_MS / 1000, monotonic=time.monotonic, sleep=time.sleep)
    monkeypatch.setattr(copier, "time", clock)


def partition(
    start: int = 0, end: int | None = None, topic: str = TOPIC, number: int = PARTITION, **options
) -> _Partition:
    task = CopyTask("flow", {}, {}, "dc1", "dc2", SRC, DST, topic, number, f"dc1.{topic}", start, end, **options)
    result = CopyResult(topic, number, task.dest_topic, start, start)
    return _Partition(task, result, hop_prefix(SRC, topic, number), _Writer(0, FakeProducer()), start, start)


def record(
    offset: int,
    value: bytes | None = b"v",
    key: bytes | None = b"k",
    headers=None,
    timestamp: int = 1000,
    topic: str = TOPIC,
    number: int = PARTITION,
) -> FakeMessage:
    return FakeMessage(topic, number, offset, key, value, headers, timestamp)


def run(part: _Partition, messages: list[FakeMessage]) -> list:
    _copy(messages, {(part.task.topic, part.task.partition): part}, callback)
    return part.writer.producer.produced


def copied_offsets(produced: list) -> list[int]:
    """Source offsets named by the hop each copy got."""
    return [Hop.decode(p.headers[-1][1]).offset for p in produced]


def callback(err, msg) -> None:  # identity checked: the copier passes its delivery callback through
    pass


def hop(cluster: str, topic: str, partition: int, offset: int, ts: int = 1) -> tuple[str, bytes]:
    return HEADER, Hop(cluster, topic, partition, offset, ts).encode()


def test_record_is_copied_unchanged_into_the_same_partition_with_one_hop_appended() -> None:
    part = partition(start=7)
    produced = run(part, [record(7, b"value", b"key", [("trace", b"t1"), ("empty", None)], timestamp=123456)])
    assert len(produced) == 1
    copy = produced[0]
    assert (copy.topic, copy.partition, copy.key, copy.value, copy.timestamp) == (DEST, 3, b"key", b"value", 123456)
    assert copy.headers == [("trace", b"t1"), ("empty", None), (HEADER, b"srcCluster,orders,3,7,1700000000500")]
    assert Hop.decode(copy.headers[-1][1]) == Hop(SRC, TOPIC, 3, 7, NOW_MS)
    assert copy.on_delivery is callback
    r = part.result
    assert (part.position, r.records, r.bytes, r.filtered, r.first_offset, r.last_offset) == (8, 1, 8, 0, 7, 7)
    assert (part.since_progress, part.writer.dirty) == (1, True)


def test_existing_hops_are_kept_and_the_new_hop_comes_last() -> None:
    earlier = hop("dc0Cluster", "orders", 1, 42, 99)
    produced = run(partition(), [record(0, headers=[earlier])])
    assert produced[0].headers == [earlier, (HEADER, b"srcCluster,orders,3,0,1700000000500")]


def test_null_value_and_null_key_are_copied_as_null() -> None:
    part = partition()
    produced = run(part, [record(0, value=None, key=b"tomb"), record(1, value=b"abc", key=None)])
    assert [(p.key, p.value) for p in produced] == [(b"tomb", None), (None, b"abc")]
    assert produced[0].headers == [(HEADER, b"srcCluster,orders,3,0,1700000000500")]
    assert (part.result.records, part.result.bytes) == (2, 4 + 3)


def test_one_copy_time_per_batch_and_offsets_per_record() -> None:
    produced = run(partition(start=5), [record(5), record(6), record(9)])  # 7, 8: markers or compacted
    assert [p.headers[-1][1] for p in produced] == [b"srcCluster,orders,3,%d,1700000000500" % o for o in (5, 6, 9)]


def test_without_provenance_no_hop_is_added_but_the_cycle_rule_still_applies() -> None:
    part = partition(provenance=False)
    produced = run(part, [record(0, headers=[("trace", b"t")]), record(1), record(2, headers=[hop(DST, DEST, 0, 5)])])
    assert [p.headers for p in produced] == [[("trace", b"t")], []]
    assert (part.result.records, part.result.filtered, part.position) == (2, 1, 3)


def test_record_whose_provenance_names_the_target_cluster_and_topic_is_filtered() -> None:
    part = partition(start=10)
    produced = run(
        part,
        [
            record(10, headers=[hop(DST, DEST, 0, 5)]),  # came from the destination itself: a cycle
            record(11, headers=[hop(DST, DEST, 0, 6), hop("dc0Cluster", "orders", 3, 1)]),  # named by any hop
            record(12, headers=[hop(DST, "orders", 0, 7)]),  # same cluster, other topic: copied
            record(13, headers=[hop("otherCluster", DEST, 0, 8)]),  # other cluster, same topic: copied
        ],
    )
    assert [p.headers[0] for p in produced] == [hop(DST, "orders", 0, 7), hop("otherCluster", DEST, 0, 8)]
    r = part.result
    assert (part.position, r.records, r.filtered, r.first_offset, r.last_offset) == (14, 2, 2, 12, 13)
    assert part.since_progress == 2


def test_filtered_records_alone_move_the_position_but_copy_nothing() -> None:
    part = partition(start=0)
    assert run(part, [record(0, headers=[hop(DST, DEST, 0, 1)]), record(1, headers=[hop(DST, DEST, 0, 2)])]) == []
    assert (part.position, part.result.filtered, part.result.first_offset, part.since_progress) == (2, 2, None, 0)
    assert not part.writer.dirty


def test_force_copy_overrides_the_cycle_rule_and_still_appends_a_hop() -> None:
    blocked_hop = hop(DST, DEST, 0, 5)
    part = partition(force=ForceCopy(cluster=DST, topic=r"dc1\..*"))
    produced = run(part, [record(0, headers=[blocked_hop])])
    assert produced[0].headers == [blocked_hop, (HEADER, b"srcCluster,orders,3,0,1700000000500")]
    assert (part.result.records, part.result.filtered) == (1, 0)


@pytest.mark.parametrize(
    ("force", "copied"),
    [
        (ForceCopy(cluster="someoneElse"), False),  # the override does not name the blocking cluster
        (ForceCopy(topic="orders"), False),  # nor its topic
        (ForceCopy(from_ms=1000, to_ms=2000), True),  # record time 1000 is in [from, to)
        (ForceCopy(from_ms=1001), False),
        (ForceCopy(to_ms=1000), False),
    ],
)
def test_force_copy_only_for_matching_cluster_topic_and_time(force: ForceCopy, copied: bool) -> None:
    part = partition(force=force)
    produced = run(part, [record(0, headers=[hop(DST, DEST, 0, 5)], timestamp=1000)])
    assert (len(produced), part.result.filtered) == ((1, 0) if copied else (0, 1))


def test_time_range_keeps_from_inclusive_to_exclusive() -> None:
    part = partition(start=0, from_ms=100, to_ms=200)
    produced = run(part, [record(o, value=b"%d" % ts, timestamp=ts) for o, ts in enumerate((99, 100, 199, 200, 150))])
    assert [p.value for p in produced] == [b"100", b"199", b"150"]
    assert [p.timestamp for p in produced] == [100, 199, 150]
    r = part.result
    assert (part.position, r.records, r.filtered, r.first_offset, r.last_offset) == (5, 3, 2, 1, 4)


@pytest.mark.parametrize(
    ("from_ms", "to_ms", "copied"), [(None, 1000, []), (None, 1001, [0]), (1000, None, [0]), (1001, None, [])]
)
def test_time_range_with_one_bound(from_ms, to_ms, copied) -> None:
    part = partition(from_ms=from_ms, to_ms=to_ms)
    assert copied_offsets(run(part, [record(0, timestamp=1000)])) == copied


def test_records_at_or_past_the_end_are_not_copied() -> None:
    part = partition(start=0, end=3)
    produced = run(part, [record(0), record(1), record(2), record(3), record(4)])
    assert copied_offsets(produced) == [0, 1, 2]
    assert (part.position, part.done, part.result.records, part.result.last_offset) == (3, True, 3, 2)


@pytest.mark.parametrize("after_gap", [5, 7])
def test_a_record_at_or_past_the_end_after_a_gap_ends_the_range_at_its_end(after_gap: int) -> None:
    part = partition(start=0, end=5)
    produced = run(part, [record(2), record(after_gap)])  # 3, 4 (..6) were aborted or markers
    assert copied_offsets(produced) == [2]
    assert (part.position, part.done, part.result.last_offset) == (5, True, 2)


@pytest.mark.parametrize(
    ("end", "eof", "position"),
    [
        (None, 12, 12),  # open range: up to the partition's end
        (20, 12, 12),  # bounded, end not reached yet
        (10, 12, 10),  # bounded: never past its end
        (10, 10, 10),
        (None, 4, 5),  # a stale event behind the position does not move it back
    ],
)
def test_end_of_partition_moves_the_position(end, eof, position) -> None:
    part = partition(start=5, end=end)
    assert run(part, [eof_event(TOPIC, PARTITION, eof)]) == []
    assert part.position == position
    assert part.done == (end is not None and position >= end)
    assert (part.result.records, part.result.filtered) == (0, 0)


def test_end_of_partition_after_records_of_the_batch() -> None:
    part = partition(start=0, end=10)
    produced = run(part, [record(0), record(1), eof_event(TOPIC, PARTITION, 10)])  # 2..9 aborted or markers
    assert len(produced) == 2
    assert (part.position, part.done, part.result.last_offset) == (10, True, 1)


def test_batch_of_two_partitions_goes_to_each_range_with_its_own_hop() -> None:
    a, b = partition(start=0, number=0), partition(start=4, number=1)
    b.writer = _Writer(1, FakeProducer())
    active = {(TOPIC, 0): a, (TOPIC, 1): b}
    batch = [
        record(0, number=0),
        record(4, number=1),
        record(1, number=0),
        record(5, number=1),
        record(9, number=2),
    ]  # partition 2 is not (or no longer) assigned: skipped
    _copy(batch, active, callback)
    assert [p.headers[-1][1] for p in a.writer.producer.produced] == [
        b"srcCluster,orders,0,0,1700000000500",
        b"srcCluster,orders,0,1,1700000000500",
    ]
    assert [(p.partition, p.headers[-1][1]) for p in b.writer.producer.produced] == [
        (1, b"srcCluster,orders,1,4,1700000000500"),
        (1, b"srcCluster,orders,1,5,1700000000500"),
    ]
    assert (a.position, b.position) == (2, 6)


def test_records_of_a_finished_range_still_in_the_batch_are_skipped() -> None:
    part = partition(start=0, end=1)
    produced = run(part, [record(0), record(1), eof_event(TOPIC, PARTITION, 1)])
    assert len(produced) == 1 and part.position == 1


def test_malformed_provenance_fails_the_copy_naming_the_offset() -> None:
    part = partition()
    with pytest.raises(CopyError, match="dc1:orders-3 offset 0: malformed __kdr_prov"):
        run(part, [record(0, headers=[(HEADER, b"not,a,hop")])])
    assert part.writer.producer.produced == []


def test_a_read_error_fails_the_copy() -> None:
    error = FakeMessage(TOPIC, PARTITION, 0, error=KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    with pytest.raises(CopyError, match="reading dc1:orders-3"):
        run(partition(), [error])


class FencedProducer(FakeProducer):
    """A writer whose slot a newer replicator took over: librdkafka raises its fatal error from produce()."""

    def produce(self, topic: str, *args, **kwargs) -> None:
        raise KafkaException(
            KafkaError(KafkaError._FENCED, "This instance has been fenced by a newer instance", fatal=True)
        )


def test_a_writer_fenced_while_recording_progress_stops_with_the_fenced_line() -> None:
    part = partition()
    part.writer = _Writer(0, FencedProducer())
    part.position = 5  # copied past what was recorded
    target = types.SimpleNamespace(get_watermark_offsets=lambda tp, timeout: (0, 5))
    clients = copier._Clients(consumer=None, target=target, reader=None, admin=None)  # type: ignore[arg-type]
    with pytest.raises(copier.FencedError, match="^flow flow: fenced out of dc2 by a newer replicator of this flow"):
        copier._record_progress(clients, [part], {0: part.writer}, final=False)


class TransactionalProducer(FakeProducer):
    """A writer that also counts its transactions."""

    def __init__(self) -> None:
        super().__init__()
        self.transactions: list[str] = []

    def commit_transaction(self, timeout: float) -> None:
        self.transactions.append("commit")

    def begin_transaction(self) -> None:
        self.transactions.append("begin")


def test_progress_is_one_record_per_moved_partition_in_the_transaction_of_its_copies() -> None:
    moved, idle = partition(start=3), partition(start=0, number=4)
    moved.writer = idle.writer = _Writer(0, TransactionalProducer())
    run(moved, [record(3), record(4)])
    commits: list[tuple] = []
    asked: list[list[tuple[str, int]]] = []

    def committed(partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        """The source group as it stands: what the commits so far set (the final one waits for it)."""
        asked.append([(tp.topic, tp.partition) for tp in partitions])
        held = {(tp.topic, tp.partition): tp.offset for offsets, _ in commits for tp in offsets}
        return [TopicPartition(tp.topic, tp.partition, held.get((tp.topic, tp.partition), -1001)) for tp in partitions]

    consumer = types.SimpleNamespace(
        commit=lambda offsets, asynchronous: commits.append((offsets, asynchronous)), committed=committed
    )
    # What a read_committed reader sees of the destination: Apache Kafka writes the commit's markers after EndTxn
    # returns, so the last transaction's copies show up a moment later (12 was the high watermark, 13 with the marker).
    visible = iter([7, 7, 13])
    looks: list[tuple[list[tuple[str, int]], IsolationLevel]] = []

    def list_offsets(asked: dict, isolation_level: IsolationLevel, request_timeout: float) -> dict:
        looks.append(([(tp.topic, tp.partition) for tp in asked], isolation_level))
        offset = next(visible)
        return {tp: _answered(types.SimpleNamespace(offset=offset)) for tp in asked}

    clients = copier._Clients(
        consumer=consumer,
        target=types.SimpleNamespace(get_watermark_offsets=lambda tp, timeout: (0, 12)),
        reader=None,
        admin=types.SimpleNamespace(list_offsets=list_offsets),
    )  # type: ignore[arg-type]
    copier._record_progress(clients, [moved, idle], {0: moved.writer}, final=True)
    # A bounded range ends once its copies are readable (the last stable offset past them), not before.
    assert looks == [([(DEST, 3)], IsolationLevel.READ_COMMITTED)] * 3
    producer = moved.writer.producer
    recorded = [p for p in producer.produced if p.topic != DEST]
    assert [(p.topic, p.key, json.loads(p.value)) for p in recorded] == [
        (PROGRESS, b"flow/orders/3", {"next": 5, "dest_topic": DEST, "dest_next": 12, "source_cluster": SRC})
    ]  # nothing else: no offset syncs, and nothing for the partition that did not move
    assert producer.transactions == ["commit", "begin"]
    # Committed without blocking, then confirmed (a synchronous commit to a lost source would never return).
    assert [(tp.topic, tp.partition, tp.offset) for tp in commits[0][0]] == [(TOPIC, 3, 5)] and commits[0][1] is True
    assert asked == [[(TOPIC, 3)]]
    assert (moved.recorded, moved.result.next, moved.since_progress, moved.writer.dirty) == (5, 5, 0, False)


def _answered(value: object) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future


def test_progress_waits_for_a_target_that_drops_its_broker_handle_and_comes_back() -> None:
    """A target node killed and started again: librdkafka drops its broker handle and a high-watermark call in flight
    fails at once (_DESTROY_BROKER, seen on Apache Kafka); the replicator asks again instead of ending its epoch."""
    part = partition()
    part.writer = _Writer(0, TransactionalProducer())
    part.position = 5
    answers = [KafkaError._DESTROY_BROKER, KafkaError._TRANSPORT, KafkaError.NOT_LEADER_FOR_PARTITION, (0, 9)]
    refreshed: list[str] = []

    def watermarks(tp: TopicPartition, timeout: float) -> tuple[int, int]:
        answer = answers.pop(0)
        if isinstance(answer, int):
            raise KafkaException(KafkaError(answer))
        return answer

    target = types.SimpleNamespace(get_watermark_offsets=watermarks, list_topics=lambda t, timeout: refreshed.append(t))
    consumer = types.SimpleNamespace(commit=lambda offsets, asynchronous: None)
    clients = copier._Clients(consumer=consumer, target=target, reader=None, admin=None)  # type: ignore[arg-type]
    copier._record_progress(clients, [part], {0: part.writer}, final=False)
    assert answers == [] and refreshed == [DEST] * 3
    [recorded] = [p for p in part.writer.producer.produced if p.topic == PROGRESS]
    assert json.loads(recorded.value)["dest_next"] == 9


def test_progress_fails_on_an_error_that_is_not_an_outage() -> None:
    part = partition()
    part.writer = _Writer(0, TransactionalProducer())
    part.position = 5

    def refused(tp: TopicPartition, timeout: float) -> tuple[int, int]:
        raise KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))

    target = types.SimpleNamespace(get_watermark_offsets=refused)
    clients = copier._Clients(consumer=None, target=target, reader=None, admin=None)  # type: ignore[arg-type]
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        copier._record_progress(clients, [part], {0: part.writer}, final=False)
