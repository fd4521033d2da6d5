"""A flow's copy rounds (replication/rounds.py): a range starts where the destination says the flow stopped, ends at
the source's read_committed end, and records deleted before they were copied are counted as lost."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from confluent_kafka import IsolationLevel
from confluent_kafka.admin import OffsetSpec
from support.fakes import FakeConsumer, FakeMessage

from kafka_dr.replication import rounds
from kafka_dr.replication.internal import HEARTBEATS, PROGRESS, partition_key
from kafka_dr.replication.provenance import HEADER, ForceCopy, Hop
from kafka_dr.replication.resume import Progress
from kafka_dr.replication.rounds import CopyRounds, Lost
from kafka_dr.topology import Cluster, Flow, TopicFilter

SRC, DST = "srcCluster", "dstCluster"
FLOW = Flow("dc1-to-dc2", "dc1", "dc2", TopicFilter((re.compile(".*"),)), rename={"orders": "dc1.{topic}"})


def copies(
    dest_topic: str, partition: int, origin_topic: str, origin_offsets: list[int], first: int = 0
) -> list[FakeMessage]:
    return [
        FakeMessage(
            dest_topic, partition, first + i, None, b"v", [(HEADER, Hop(SRC, origin_topic, partition, o, 1).encode())]
        )
        for i, o in enumerate(origin_offsets)
    ]


class Source:
    """Source partitions with their log start and read_committed end offsets: {(topic, partition): (start, end)}."""

    def __init__(self, spans: dict[tuple[str, int], tuple[int, int]]) -> None:
        self.spans = spans

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for topic, partition in self.spans:
            counts[topic] = max(counts.get(topic, 0), partition + 1)
        return counts

    def lookup(self, tps, spec) -> dict[tuple[str, int], int]:
        index = {OffsetSpec.earliest(): 0, OffsetSpec.latest(): 1}[spec]
        return {(tp.topic, tp.partition): self.spans[(tp.topic, tp.partition)][index] for tp in tps}


@pytest.fixture
def reader() -> FakeConsumer:
    return FakeConsumer().add(PROGRESS, 0, [])


def context(
    reader: FakeConsumer,
    source: Source,
    dest_ends: dict[tuple[str, int], tuple[int, int]],
    monkeypatch: pytest.MonkeyPatch,
    force: ForceCopy | None = None,
) -> CopyRounds:
    """Copy rounds over fake open clients: `dest_ends` are the destination (high watermark, last stable offset)."""
    clients = SimpleNamespace(
        flow=FLOW,
        retries=1,
        source=Cluster("dc1", "dc1:9092"),
        target=Cluster("dc2", "dc2:9092"),
        source_config={"bootstrap.servers": "dc1:9092"},
        target_config={"bootstrap.servers": "dc2:9092"},
        source_admin=None,
        target_admin=None,
        source_cluster_id=SRC,
        target_cluster_id=DST,
        reader=reader,
        source_partitions=source.counts,
        offsets=source.lookup,
        dest_topic=FLOW.destination_topic,
        existing=lambda partitions: [key for key in partitions if key in dest_ends],
    )
    copy_rounds = CopyRounds(clients, force=force)  # type: ignore[arg-type]
    copy_rounds.sync_topics = lambda: "synced"  # type: ignore[method-assign]

    def end_offsets(admin, partitions, isolation):
        index = {IsolationLevel.READ_UNCOMMITTED: 0, IsolationLevel.READ_COMMITTED: 1}[isolation]
        return {key: dest_ends[key][index] for key in partitions}

    monkeypatch.setattr(rounds, "end_offsets", end_offsets)
    return copy_rounds


def ranges(copy_round) -> dict[tuple[str, int], tuple[str, int, int | None, int]]:
    return {(t.topic, t.partition): (t.dest_topic, t.start, t.end, t.dest_from) for t in copy_round.tasks}


def test_ranges_start_at_resume_or_log_start_and_end_at_the_read_committed_end(reader, monkeypatch) -> None:
    reader.add("dc1.orders", 0, copies("dc1.orders", 0, "orders", [3, 4, 5, 6]))  # resumes at 7
    reader.add("dc1.orders", 1, [], low=0, high=0)  # nothing copied yet: from the log start
    reader.add("payments", 0, copies("payments", 0, "payments", [0, 1]) + [FakeMessage("payments", 0, 2)])
    source = Source({("orders", 0): (3, 10), ("orders", 1): (2, 9), ("payments", 0): (0, 2)})
    dest_ends = {("dc1.orders", 0): (4, 4), ("dc1.orders", 1): (0, 0), ("payments", 0): (3, 3)}
    copy_round = context(reader, source, dest_ends, monkeypatch).next()
    assert ranges(copy_round) == {
        ("orders", 0): ("dc1.orders", 7, 10, 4),
        ("orders", 1): ("dc1.orders", 2, 9, 0),
        ("payments", 0): ("payments", 2, 2, 3),  # copied up to the end: an empty range
    }
    assert copy_round.lost == [] and copy_round.sync == "synced"
    task = copy_round.tasks[0]
    assert (task.flow, task.source_cluster_id, task.target_cluster_id, task.source_cluster, task.target_cluster) == (
        "dc1-to-dc2",
        SRC,
        DST,
        "dc1",
        "dc2",
    )
    assert (task.provenance, task.force, task.from_ms, task.to_ms) == (True, None, None, None)


def test_progress_of_the_flow_bounds_the_resume(reader, monkeypatch) -> None:
    reader.add(
        PROGRESS,
        0,
        [
            FakeMessage(
                PROGRESS, 0, 0, partition_key("dc1-to-dc2", "orders", 0), Progress(21, "dc1.orders", 1).to_json()
            ),
            FakeMessage(
                PROGRESS, 0, 1, partition_key("other-flow", "orders", 0), Progress(90, "dc1.orders", 0).to_json()
            ),
        ],
    )
    reader.add("dc1.orders", 0, copies("dc1.orders", 0, "orders", [20, 21, 22]))
    source = Source({("orders", 0): (0, 50)})
    copy_round = context(reader, source, {("dc1.orders", 0): (3, 3)}, monkeypatch).next()
    assert ranges(copy_round) == {
        ("orders", 0): ("dc1.orders", 23, 50, 3)
    }  # the copy of 22 came after the progress record
    assert reader.assignments[-1] == ("dc1.orders", 0, 1)  # read from the progress record's destination offset on


def test_progress_past_the_destination_high_watermark_is_ignored(reader, monkeypatch) -> None:
    reader.add(
        PROGRESS,
        0,
        [
            FakeMessage(
                PROGRESS, 0, 0, partition_key("dc1-to-dc2", "orders", 0), Progress(400, "dc1.orders", 300).to_json()
            )
        ],
    )
    reader.add("dc1.orders", 0, copies("dc1.orders", 0, "orders", [0, 1]))  # re-created and copied again
    source = Source({("orders", 0): (0, 500)})
    copy_round = context(reader, source, {("dc1.orders", 0): (2, 2)}, monkeypatch).next()
    assert ranges(copy_round) == {("orders", 0): ("dc1.orders", 2, 500, 2)}


def test_progress_under_an_open_destination_transaction_is_used(reader, monkeypatch) -> None:
    # Destination high watermark 6, stable end 4: the progress record at 6 was committed with copies that another
    # producer's open transaction still hides from read_committed.
    reader.add(
        PROGRESS,
        0,
        [FakeMessage(PROGRESS, 0, 0, partition_key("dc1-to-dc2", "orders", 0), Progress(6, "dc1.orders", 6).to_json())],
    )
    reader.add("dc1.orders", 0, copies("dc1.orders", 0, "orders", [0, 1, 2, 3]))
    source = Source({("orders", 0): (0, 9)})
    copy_round = context(reader, source, {("dc1.orders", 0): (6, 4)}, monkeypatch).next()
    assert ranges(copy_round) == {("orders", 0): ("dc1.orders", 6, 9, 4)}


def test_position_below_the_log_start_is_lost_and_the_range_starts_at_the_log_start(reader, monkeypatch) -> None:
    reader.add("dc1.orders", 0, copies("dc1.orders", 0, "orders", [0, 1, 2, 3, 4]))  # resumes at 5
    reader.add("dc1.orders", 1, copies("dc1.orders", 1, "orders", [0, 1]))  # resumes at 2 = log start: nothing lost
    source = Source({("orders", 0): (8, 20), ("orders", 1): (2, 6)})
    dest_ends = {("dc1.orders", 0): (5, 5), ("dc1.orders", 1): (2, 2)}
    copy_round = context(reader, source, dest_ends, monkeypatch).next()
    assert copy_round.lost == [Lost("orders", 0, 5, 8)]
    assert copy_round.lost[0].records == 3
    assert ranges(copy_round) == {("orders", 0): ("dc1.orders", 8, 20, 5), ("orders", 1): ("dc1.orders", 2, 6, 2)}


def test_known_positions_skip_the_destination_and_are_still_checked_against_the_log_start(monkeypatch) -> None:
    reader = FakeConsumer()  # no progress topic, no destination partitions: reading them would fail
    source = Source({("orders", 0): (0, 30), ("orders", 1): (10, 12)})
    dest_ends = {("dc1.orders", 0): (17, 16), ("dc1.orders", 1): (0, 0)}
    copy_round = context(reader, source, dest_ends, monkeypatch).next(positions={("orders", 0): 25, ("orders", 1): 4})
    assert ranges(copy_round) == {("orders", 0): ("dc1.orders", 25, 30, 16), ("orders", 1): ("dc1.orders", 10, 12, 0)}
    assert copy_round.lost == [Lost("orders", 1, 4, 10)]
    assert reader.assignments == []


def test_heartbeats_keep_their_name_and_a_forced_copy_reaches_every_task(reader, monkeypatch) -> None:
    reader.add(HEARTBEATS, 0, [], low=0, high=0)
    reader.add("dc1.orders", 0, [], low=0, high=0)
    source = Source({(HEARTBEATS, 0): (5, 7), ("orders", 0): (0, 1)})
    force = ForceCopy(cluster=DST)
    dest_ends = {(HEARTBEATS, 0): (0, 0), ("dc1.orders", 0): (0, 0)}
    copy_round = context(reader, source, dest_ends, monkeypatch, force=force).next()
    assert ranges(copy_round) == {(HEARTBEATS, 0): (HEARTBEATS, 5, 7, 0), ("orders", 0): ("dc1.orders", 0, 1, 0)}
    assert {t.force for t in copy_round.tasks} == {force}


def test_no_source_partitions_gives_an_empty_plan(monkeypatch) -> None:
    copy_round = context(FakeConsumer(), Source({}), {}, monkeypatch).next()
    assert (copy_round.tasks, copy_round.lost, copy_round.sync) == ([], [], "synced")


def test_a_round_without_sync_leaves_the_clusters_unchanged_and_resumes_missing_destinations_at_the_log_start(
    reader, monkeypatch
) -> None:
    reader.add("dc1.orders", 0, copies("dc1.orders", 0, "orders", [0, 1, 2]))
    source = Source({("orders", 0): (0, 10), ("orders", 1): (4, 6)})  # dc1.orders-1 was never made
    copy_rounds = context(reader, source, {("dc1.orders", 0): (3, 3)}, monkeypatch)
    copy_rounds.sync_topics = lambda: pytest.fail("a round without sync synced the topics")  # type: ignore[method-assign]
    copy_round = copy_rounds.next(sync=False)
    assert copy_round.sync is None
    assert ranges(copy_round) == {("orders", 0): ("dc1.orders", 3, 10, 3), ("orders", 1): ("dc1.orders", 4, 6, 0)}


def test_a_round_that_syncs_topics_needs_the_target_prepared_first(monkeypatch) -> None:
    clients = SimpleNamespace(flow=FLOW, retries=1, source=Cluster("dc1", "dc1:9092"))
    with pytest.raises(RuntimeError, match=r"^flow dc1-to-dc2: prepare_target\(\) comes before a round that syncs"):
        CopyRounds(clients).next()  # type: ignore[arg-type]
