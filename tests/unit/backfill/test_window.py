"""A backfill's checks and plan (kafka_dr/backfill/window.py) without a cluster: the window from the params, the
copier's flow, the window's offsets per partition (on a fake source), what the target lacks of it (on a fake
consumer), and when the flow's own destination cannot take the copies in order."""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec
from support.fakes import FakeConsumer, FakeMessage

from kafka_dr.backfill import window as backfill
from kafka_dr.backfill.window import (
    BackfillError,
    PartitionWindow,
    PresenceTask,
    Window,
    backfill_flow,
    live_destination_refusals,
    missing_ranges,
    parse_window,
    resolve,
)
from kafka_dr.replication.internal import HEARTBEATS
from kafka_dr.replication.provenance import HEADER, Hop
from kafka_dr.times import epoch_ms
from kafka_dr.topology import parse_topology

NOW_MS = epoch_ms("2026-11-25T12:00:00Z", "now")
FLOW = parse_topology(
    {
        "clusters": {"dc1": {"bootstrap_servers": "dc1:9092"}, "dc2": {"bootstrap_servers": "dc2:9092"}},
        "flows": [
            {
                "name": "f",
                "source": "dc1",
                "target": "dc2",
                "topics": {"include": ["orders", "payments", "refunds"]},
                "rename": {"payments": "{topic}.replica"},
            }
        ],
    }
).flow("f")


# --- the window -----------------------------------------------------------------------------------------------------


def test_a_time_window_is_start_inclusive_end_exclusive_and_may_end_now() -> None:
    window = parse_window("2026-11-25T10:00:00Z", "2026-11-25T12:00:00+00:00", None, now_ms=NOW_MS)
    assert window == Window(NOW_MS - 7_200_000, NOW_MS)
    assert window.to_dict() == {"start_ms": NOW_MS - 7_200_000, "end_ms": NOW_MS}


@pytest.mark.parametrize(
    "offsets", ['{"orders:0": [3, 7], "pay.ments-x:12": [0, 0]}', {"orders:0": [3, 7], "pay.ments-x:12": (0, 0)}]
)
def test_an_offsets_window_from_json_text_or_a_mapping(offsets) -> None:
    window = parse_window(None, "", offsets)
    assert window.offsets == {("orders", 0): (3, 7), ("pay.ments-x", 12): (0, 0)}
    assert window.to_dict() == {"offsets": {"orders:0": [3, 7], "pay.ments-x:12": [0, 0]}}


@pytest.mark.parametrize(
    ("start", "end", "offsets", "error"),
    [
        ("2026-11-25T10:00:00Z", None, '{"orders:0": [1, 2]}', "give window_start/window_end or offsets, not both"),
        ("2026-11-25T10:00:00Z", None, None, "a window needs both window_start and window_end (or offsets)"),
        (None, "2026-11-25T10:00:00Z", {}, "a window needs both window_start and window_end (or offsets)"),
        ("yesterday", "2026-11-25T10:00:00Z", None, "window_start: not an ISO-8601 time: 'yesterday'"),
        ("2026-11-25T10:00:00Z", "2026-11-25T10:00:00Z", None, "window_end 2026-11-25T10:00:00Z is not after"),
        ("2026-11-25T10:00:00Z", "2026-11-25T12:00:00.001Z", None, "is in the future: records of it may still come"),
        (None, None, "{oops", "offsets: not JSON: '{oops'"),
        (None, None, "[]", 'offsets: expected {"topic:partition": [first, last]}'),
        (None, None, '{"orders": [1, 2]}', "offsets: 'orders': [1, 2]: expected"),
        (None, None, '{"orders:0": [5, 4]}', "first <= last"),
        (None, None, '{"orders:0": [-1, 4]}', "first <= last"),
        (None, None, '{"orders:0": [1, 2, 3]}', "first <= last"),
        (None, None, '{"orders:0": [true, 2]}', "first <= last"),
        (None, None, '{"orders:0": [1.0, 2]}', "first <= last"),
    ],
)
def test_a_bad_window_is_one_line(start, end, offsets, error: str) -> None:
    with pytest.raises(BackfillError, match="^[^\n]*$") as excinfo:
        parse_window(start, end, offsets, now_ms=NOW_MS)
    assert error in str(excinfo.value)


# --- the copier's flow ----------------------------------------------------------------------------------------------


def test_the_backfill_flow_copies_the_selected_topics_to_the_flows_names_by_default() -> None:
    copier = backfill_flow(FLOW, None, None, ["payments", "orders", "audit", HEARTBEATS])
    assert copier.name == "f.backfill" and (copier.source, copier.target) == ("dc1", "dc2")
    assert [t for t in ["orders", "payments", "refunds", "audit", HEARTBEATS] if copier.topics.matches(t)] == [
        "orders",
        "payments",
    ]
    assert [copier.destination_topic(t) for t in ("orders", "payments")] == ["orders", "payments.replica"]


def test_topics_and_a_target_format_narrow_and_rename_the_copies() -> None:
    copier = backfill_flow(FLOW, "pay.*|orders", "{topic}.backfill", ["orders", "payments", "refunds"])
    assert [copier.destination_topic(t) for t in ("orders", "payments")] == ["orders.backfill", "payments.backfill"]
    assert not copier.topics.matches("refunds")
    one = backfill_flow(FLOW, "orders", "orders-restored", ["orders", "orders2"])  # a plain name for one topic
    assert one.topics.matches("orders") and not one.topics.matches("orders2")
    assert one.destination_topic("orders") == "orders-restored"


@pytest.mark.parametrize(
    ("topics", "target", "error"),
    [
        ("(", None, "topics: bad regex '('"),
        ("audit", None, "topics 'audit' selects none of the topics flow f copies from dc1"),
        ("order", None, "topics 'order' selects none"),  # a full match only
        (None, "restored", "target_topic 'restored' has no {topic} but 2 topics are selected"),
        (None, "{topic}-{n}", "target_topic '{topic}-{n}': only a plain {topic} placeholder is allowed"),
        (None, "{0}", "only a plain {topic} placeholder is allowed"),
        (None, "_kdr.{topic}", "makes '_kdr.orders', not a legal topic name outside kafka-dr's own"),
        (None, "{topic} copy", "makes 'orders copy', not a legal topic name"),
        ("orders", "..", "makes '..', not a legal topic name"),
    ],
)
def test_a_bad_selection_or_target_is_one_line(topics, target, error: str) -> None:
    with pytest.raises(BackfillError) as excinfo:
        backfill_flow(FLOW, topics, target, ["orders", "payments", "audit"])
    assert error in str(excinfo.value)


# --- the window per partition ---------------------------------------------------------------------------------------


@dataclass
class Partition:
    low: int
    high: int
    timestamps: dict[int, int]  # retained offset -> record time (ms)


class Source:
    """The backfill's FlowClients as resolve() asks it: partitions, offsets by spec, destination names."""

    def __init__(self, partitions: dict[tuple[str, int], Partition], flow=FLOW) -> None:
        self.partitions = partitions
        self.flow = flow

    def source_partitions(self) -> dict[str, int]:
        counts: dict[str, int] = {HEARTBEATS: 1}
        for topic, partition in self.partitions:
            counts[topic] = max(counts.get(topic, 0), partition + 1)
        return counts

    def dest_topic(self, topic: str) -> str:
        return self.flow.destination_topic(topic)

    def offsets(self, tps: list[TopicPartition], spec: OffsetSpec) -> dict[tuple[str, int], int]:
        assert all(tp.topic != HEARTBEATS for tp in tps), "a backfill never copies heartbeats"
        found = {}
        for tp in tps:
            p = self.partitions[(tp.topic, tp.partition)]
            if isinstance(spec, OffsetSpec.earliest().__class__):
                found[(tp.topic, tp.partition)] = p.low
            elif isinstance(spec, OffsetSpec.latest().__class__):
                found[(tp.topic, tp.partition)] = p.high
            else:  # offsetsForTimes: the first retained record at or after the time, else -1
                at = [o for o, ts in sorted(p.timestamps.items()) if ts >= spec.timestamp]
                found[(tp.topic, tp.partition)] = at[0] if at else -1
        return found


def every_second(low: int, high: int) -> Partition:
    """Records low..high-1, one every 1000 ms from time 0 (record o at o * 1000 ms)."""
    return Partition(low, high, {o: o * 1000 for o in range(low, high)})


def test_a_time_window_becomes_offsets_per_partition() -> None:
    source = Source(
        {("orders", 0): every_second(0, 10), ("orders", 1): every_second(0, 3), ("payments", 0): every_second(0, 10)}
    )
    windows = resolve(source, Window(2500, 6000))
    assert windows == [
        PartitionWindow("orders", 0, "orders", 3, 6),
        PartitionWindow("orders", 1, "orders", 3, 3),  # every record before the window: an empty window at the end
        PartitionWindow("payments", 0, "payments.replica", 3, 6),
    ]
    assert resolve(source, Window(8500, 20_000))[0] == PartitionWindow("orders", 0, "orders", 9, 10)  # to the end


def test_a_time_window_starting_at_the_log_start_may_have_begun_in_deleted_records() -> None:
    source = Source({("orders", 0): every_second(5, 10), ("orders", 1): every_second(0, 10)})
    deleted, kept = resolve(source, Window(1000, 7000))
    assert deleted == PartitionWindow("orders", 0, "orders", 5, 7, unavailable=(None, 4))
    assert kept == PartitionWindow("orders", 1, "orders", 1, 7)
    from_the_first = resolve(source, Window(0, 3000))[1]  # nothing deleted: a log starting at 0 lost nothing
    assert from_the_first == PartitionWindow("orders", 1, "orders", 0, 3)


def test_an_offsets_window_is_inclusive_and_says_what_retention_deleted() -> None:
    source = Source({("orders", 0): every_second(0, 10), ("orders", 1): every_second(4, 10)})
    windows = resolve(source, Window(offsets={("orders", 1): (2, 6)}))
    assert windows == [PartitionWindow("orders", 1, "orders", 4, 7, unavailable=(2, 3))]
    gone = resolve(source, Window(offsets={("orders", 1): (0, 2)}))  # every offset of it deleted
    assert gone == [PartitionWindow("orders", 1, "orders", 4, 4, unavailable=(0, 2))]
    assert resolve(source, Window(offsets={("orders", 0): (9, 9)})) == [PartitionWindow("orders", 0, "orders", 9, 10)]


def test_offsets_of_a_partition_the_backfill_does_not_have_or_past_its_end_are_refused() -> None:
    source = Source({("orders", 0): every_second(0, 10)})
    with pytest.raises(BackfillError, match=r"^offsets: orders:1, audit:0: no such partition among the backfill"):
        resolve(source, Window(offsets={("orders", 1): (0, 1), ("audit", 0): (0, 1), ("orders", 0): (0, 1)}))
    with pytest.raises(BackfillError, match=r"^offsets past the end of their partition: orders:0 ends at 10$"):
        resolve(source, Window(offsets={("orders", 0): (5, 10)}))


def test_a_backfill_of_no_partitions_is_an_empty_plan() -> None:
    assert resolve(Source({}), Window(0, 1000)) == []


# --- what the target lacks ------------------------------------------------------------------------------------------


def copy(dest_offset: int, origin_offset: int, origin: tuple[str, str, int] = ("dc1-id", "orders", 0)) -> FakeMessage:
    headers = [(HEADER, Hop(*origin, origin_offset, 1).encode())]
    return FakeMessage("orders.backfill", 0, dest_offset, b"k", b"v", headers)


def presence(monkeypatch: pytest.MonkeyPatch, target: FakeConsumer, first: int, end: int) -> tuple:
    monkeypatch.setattr(backfill, "Consumer", lambda config: target)
    window = PartitionWindow("orders", 0, "orders.backfill", first, end)
    found, runs, present = missing_ranges(PresenceTask({"bootstrap.servers": "dc2:9092"}, "dc1-id", window))
    assert found == window
    return runs, present


def test_the_runs_the_target_lacks_by_provenance(monkeypatch) -> None:
    held = [
        copy(0, 1),  # before the window
        copy(1, 3),
        copy(2, 4),
        FakeMessage("orders.backfill", 0, 3, b"k", b"local"),
        copy(4, 5, origin=("dc1-id", "orders", 1)),  # another partition's copy
        copy(5, 7),
        copy(6, 10),  # past the window
    ]
    target = FakeConsumer().add("orders.backfill", 0, held)
    assert presence(monkeypatch, target, 2, 10) == ([(2, 3), (5, 7), (8, 10)], 3)
    assert presence(monkeypatch, target, 3, 5) == ([], 2)  # a rerun copies nothing
    assert presence(monkeypatch, target, 7, 7) == ([], 0)


def test_a_target_topic_not_made_yet_lacks_the_whole_window(monkeypatch) -> None:
    assert presence(monkeypatch, FakeConsumer(), 2, 6) == ([(2, 6)], 0)


def test_other_errors_reading_the_target_are_raised(monkeypatch) -> None:
    class Down(FakeConsumer):
        def get_watermark_offsets(self, partition, timeout=None, cached=False):
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))

    with pytest.raises(KafkaException):
        presence(monkeypatch, Down(), 2, 6)


# --- the flow's own destination -------------------------------------------------------------------------------------


def live_flow(destination: FakeConsumer, positions: dict[tuple[str, int], int]) -> SimpleNamespace:
    """The live flow's FlowClients as live_destination_refusals asks it (`tasks`: its round, see live_rounds)."""
    tasks = [SimpleNamespace(topic=t, partition=p, start=s) for (t, p), s in positions.items()]
    return SimpleNamespace(
        flow=FLOW, reader=destination, source_cluster_id="dc1-id", dest_topic=FLOW.destination_topic, tasks=tasks
    )


@pytest.fixture
def live_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """The live flow's copy round: its positions, decided with the clusters unchanged (sync=False)."""

    class Rounds:
        def __init__(self, clients: SimpleNamespace) -> None:
            self.clients = clients

        def next(self, sync: bool = True) -> SimpleNamespace:
            assert not sync, "a backfill's check must not sync the live flow's topics"
            return SimpleNamespace(tasks=self.clients.tasks)

    monkeypatch.setattr(backfill, "CopyRounds", Rounds)


def flow_copy(dest_offset: int, origin_offset: int) -> FakeMessage:
    return FakeMessage(
        "orders", 0, dest_offset, b"k", b"v", [(HEADER, Hop("dc1-id", "orders", 0, origin_offset, 1).encode())]
    )


@pytest.mark.usefixtures("live_rounds")
def test_the_flows_destination_takes_a_window_it_has_no_copies_at_or_past_and_the_flow_is_past() -> None:
    destination = FakeConsumer().add("orders", 0, [flow_copy(0, 1), flow_copy(1, 2)])
    window = PartitionWindow("orders", 0, "orders", 3, 8)
    assert live_destination_refusals(live_flow(destination, {("orders", 0): 9}), [window]) == []
    assert live_destination_refusals(live_flow(destination, {("orders", 0): 3}), [window]) == []


@pytest.mark.usefixtures("live_rounds")
def test_the_flows_destination_is_refused_when_it_holds_later_copies_or_the_flow_is_behind() -> None:
    destination = FakeConsumer().add("orders", 0, [flow_copy(0, 2), flow_copy(1, 3)])
    window = PartitionWindow("orders", 0, "orders", 3, 8)
    assert live_destination_refusals(live_flow(destination, {("orders", 0): 9}), [window]) == [
        "orders[0] holds copies of offsets past 3"
    ]
    behind = FakeConsumer().add("orders", 0, [flow_copy(0, 1)])
    assert live_destination_refusals(live_flow(behind, {("orders", 0): 2}), [window]) == [
        "flow f has not copied orders[0] up to 3 yet"
    ]


def test_a_separate_target_or_an_empty_window_is_never_refused() -> None:
    def unused(sync: bool) -> None:
        raise AssertionError("the live flow's plan is not needed")

    flow = SimpleNamespace(flow=FLOW, dest_topic=FLOW.destination_topic, plan=unused)
    windows = [PartitionWindow("orders", 0, "orders.backfill", 3, 8), PartitionWindow("orders", 1, "orders", 4, 4)]
    assert live_destination_refusals(flow, windows) == []


def test_the_json_offsets_of_a_window_read_back() -> None:
    window = Window(offsets={("orders", 1): (2, 6), ("orders", 0): (0, 0)})
    assert parse_window(None, None, json.dumps(window.to_dict()["offsets"])) == window
