"""Where a flow resumes (resume.py): the destination log is the truth, a progress record only bounds the search."""

from __future__ import annotations

import json

import pytest
from support.fakes import FakeConsumer, FakeMessage

from kafka_dr.replication import resume
from kafka_dr.replication.internal import PROGRESS, owner_key, partition_key
from kafka_dr.replication.provenance import HEADER, Hop
from kafka_dr.replication.resume import Progress, last_copy, read_progress, resume_offset

SRC = "srcCluster"
DEST, PARTITION = "dc1.orders", 0


def copy(
    dest_offset: int,
    origin_offset: int,
    cluster: str = SRC,
    topic: str = "orders",
    partition: int = PARTITION,
    earlier: tuple[str, str, int] | None = None,
) -> FakeMessage:
    """A destination record copied from (cluster, topic, partition) at origin_offset."""
    headers = [(HEADER, Hop(*earlier, 0, 1).encode())] if earlier else []
    headers.append((HEADER, Hop(cluster, topic, partition, origin_offset, 1).encode()))
    return FakeMessage(DEST, PARTITION, dest_offset, b"k", b"v", headers)


def local(dest_offset: int) -> FakeMessage:
    """A record produced into the destination directly (no provenance)."""
    return FakeMessage(DEST, PARTITION, dest_offset, b"k", b"local", [("trace", b"x")])


def destination(*messages: FakeMessage, low: int | None = None, high: int | None = None) -> FakeConsumer:
    return FakeConsumer().add(DEST, PARTITION, messages, low=low, high=high)


def resume_at(consumer: FakeConsumer, progress: Progress | None = None, high_watermark: int | None = None):
    return resume_offset(consumer, DEST, PARTITION, SRC, "orders", progress, high_watermark, timeout=1)


def starts(consumer: FakeConsumer) -> list[int]:
    return [offset for _topic, _partition, offset in consumer.assignments]


def test_progress_within_the_log_bounds_the_search_and_later_copies_are_found() -> None:
    consumer = destination(*(copy(d, 100 + d) for d in range(10)))  # origin 100..109 at 0..9
    assert resume_at(consumer, Progress(next=106, dest_topic=DEST, dest_next=6)) == 110
    assert starts(consumer) == [6]  # read from the progress record on, not from the start


def test_progress_next_wins_over_the_last_copy_when_records_after_it_were_filtered() -> None:
    consumer = destination(*(copy(d, 100 + d) for d in range(10)))
    assert resume_at(consumer, Progress(next=150, dest_topic=DEST, dest_next=10)) == 150
    assert resume_at(consumer, Progress(next=150, dest_topic=DEST, dest_next=7)) == 150
    assert starts(consumer) == [7]  # dest_next at the end: nothing to read


def test_progress_without_later_copies_of_this_origin() -> None:
    consumer = destination(copy(0, 40), copy(1, 41), local(2), copy(3, 7, partition=1), copy(4, 9, cluster="x"))
    assert resume_at(consumer, Progress(next=42, dest_topic=DEST, dest_next=2)) == 42
    assert starts(consumer) == [2]


@pytest.mark.parametrize("dest_next", [3, 9])  # the log's low and end offsets are both inside
def test_progress_at_the_edges_of_the_log_is_used(dest_next: int) -> None:
    consumer = destination(*(copy(d, d) for d in range(3, 9)), high=9)
    assert resume_at(consumer, Progress(next=500, dest_topic=DEST, dest_next=dest_next)) == 500


def test_progress_beyond_the_high_watermark_is_ignored_after_the_topic_was_recreated() -> None:
    consumer = destination(copy(0, 0), copy(1, 1), copy(2, 2), local(3))  # the re-created topic, copied again
    assert resume_at(consumer, Progress(next=5000, dest_topic=DEST, dest_next=4000), high_watermark=4) == 3
    assert resume_at(consumer, Progress(next=5000, dest_topic=DEST, dest_next=5)) == 3  # stable end is the ceiling


def test_progress_below_an_open_transaction_counts_up_to_the_high_watermark() -> None:
    # stable end 4, high watermark 6 (another producer's transaction open): the record at 6 was committed with
    # its copies, which read_committed cannot see yet.
    consumer = destination(copy(0, 0), copy(1, 1), copy(2, 2), copy(3, 3))
    assert resume_at(consumer, Progress(next=6, dest_topic=DEST, dest_next=6), high_watermark=6) == 6
    assert resume_at(consumer, Progress(next=6, dest_topic=DEST, dest_next=7), high_watermark=6) == 4


def test_progress_below_the_log_start_is_ignored() -> None:
    consumer = destination(copy(5, 15), copy(6, 16), low=5)  # retention deleted 0..4
    assert resume_at(consumer, Progress(next=12, dest_topic=DEST, dest_next=2)) == 17


def test_progress_of_another_destination_topic_is_ignored() -> None:
    consumer = destination(copy(0, 20), copy(1, 21))
    assert resume_at(consumer, Progress(next=99, dest_topic="renamed.orders", dest_next=1)) == 22


def test_backward_scan_reads_doubling_windows_until_a_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resume, "SCAN_WINDOW", 2)
    consumer = destination(copy(0, 30), copy(1, 31), copy(2, 32), *(local(d) for d in range(3, 10)))
    assert resume_at(consumer) == 33
    assert starts(consumer) == [8, 4, 0]  # [8, 10), [4, 8), [0, 4)


def test_backward_scan_returns_the_last_copy_of_the_newest_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resume, "SCAN_WINDOW", 3)
    consumer = destination(copy(0, 1), copy(1, 2), copy(2, 3), copy(3, 4), copy(4, 5), local(5), local(6))
    assert resume_at(consumer) == 6  # window [4, 7) holds the copy of 5
    assert starts(consumer) == [4]


def test_backward_scan_ignores_other_origins_interleaved(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resume, "SCAN_WINDOW", 2)
    consumer = destination(
        copy(0, 70),
        copy(1, 71),
        copy(2, 900, partition=1),  # another partition of the same topic
        copy(3, 901, cluster="otherCluster"),  # the same topic and partition of another cluster
        copy(4, 902, topic="payments"),  # another topic
        local(5),
        copy(6, 903, cluster="thirdCluster", earlier=(SRC, "orders", PARTITION)),  # came from here, then via another
        copy(7, 904, partition=2),
    )
    assert resume_at(consumer) == 72
    assert starts(consumer) == [6, 2, 0]


def test_backward_scan_stops_at_the_log_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resume, "SCAN_WINDOW", 2)
    consumer = destination(*(local(d) for d in range(5, 9)), low=5)
    assert resume_at(consumer) is None
    assert starts(consumer) == [7, 5]  # [7, 9), then [5, 7): the doubled window is cut at the log start


def test_nothing_of_this_partition_copied_gives_none() -> None:
    consumer = destination(local(0), copy(1, 5, partition=1), copy(2, 6, cluster="otherCluster"))
    assert resume_at(consumer) is None


def test_empty_destination_gives_none_without_reading() -> None:
    consumer = destination(low=7, high=7)
    assert resume_at(consumer) is None
    assert consumer.assignments == []


def test_stale_progress_then_scan_finds_nothing() -> None:
    consumer = destination(local(0), local(1))
    assert resume_at(consumer, Progress(next=80, dest_topic=DEST, dest_next=50), high_watermark=2) is None


def test_last_copy_only_looks_inside_the_range() -> None:
    consumer = destination(*(copy(d, 10 + d) for d in range(8)))
    origin = (SRC, "orders", PARTITION)
    assert last_copy(consumer, DEST, PARTITION, 2, 5, origin, timeout=1) == 14  # dest 2..4
    assert last_copy(consumer, DEST, PARTITION, 5, 5, origin, timeout=1) is None
    assert last_copy(consumer, DEST, PARTITION, 0, 8, ("x", "orders", 0), timeout=1) is None


def test_progress_last_value_per_key_wins_and_tombstones_remove() -> None:
    a, b, c = (partition_key("flow", "orders", p) for p in (0, 1, 2))

    def entry(offset: int, key: bytes | None, value: dict | None) -> FakeMessage:
        return FakeMessage(PROGRESS, 0, offset, key, None if value is None else json.dumps(value).encode())

    consumer = FakeConsumer().add(
        PROGRESS,
        0,
        [
            entry(3, a, {"next": 10, "dest_topic": DEST, "dest_next": 8}),
            entry(4, b, {"next": 1, "dest_topic": DEST, "dest_next": 1}),
            entry(5, owner_key("flow"), {"owner": "driver-1"}),  # a claim record, not progress
            entry(6, a, {"next": 20, "dest_topic": DEST, "dest_next": 17}),
            entry(7, None, {"next": 0, "dest_topic": DEST, "dest_next": 0}),  # no key: skipped
            entry(8, b, None),
            entry(9, c, {"next": 3, "dest_topic": "x", "dest_next": 2}),
        ],
        low=3,
        high=11,
    )  # a compacted log ending with transaction markers
    assert read_progress(consumer, timeout=1) == {
        "flow/orders/0": Progress(20, DEST, 17),
        "flow/orders/2": Progress(3, "x", 2),
    }


def test_progress_of_an_empty_progress_topic() -> None:
    consumer = FakeConsumer().add(PROGRESS, 0, [], low=12, high=12)
    assert read_progress(consumer, timeout=1) == {}
    assert consumer.assignments == []


def test_progress_of_another_source_cluster_is_ignored_and_one_of_this_one_kept() -> None:
    """A source rebuilt after a loss has a new id: offsets recorded for the old one would skip its records."""
    consumer = destination(copy(0, 40, cluster="oldCluster"), copy(1, 41, cluster="oldCluster"))
    lost = Progress(next=42, dest_topic=DEST, dest_next=2, source_cluster="oldCluster")
    assert resume_at(consumer, lost) is None  # nothing copied from this source yet: it starts at its beginning
    assert resume_at(destination(copy(0, 5)), Progress(9, DEST, 1, SRC)) == 9


def test_progress_records_keep_their_source_cluster() -> None:
    written = Progress(9, DEST, 1, SRC)
    consumer = FakeConsumer().add(PROGRESS, 0, [FakeMessage(PROGRESS, 0, 0, b"f/orders/0", written.to_json())])
    assert read_progress(consumer) == {"f/orders/0": written}
