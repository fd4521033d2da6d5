"""Exact offset translation (translation/offsets.py): a group committed at source offset O resumes at the first
record the flow copied from O or later, found by a binary search of the destination and one forward read."""

from __future__ import annotations

import math

import pytest
from support.fakes import FakeConsumer, FakeMessage

from kafka_dr.replication.provenance import HEADER, Hop
from kafka_dr.translation import offsets
from kafka_dr.translation.offsets import PartitionRequest, translate_partition

SRC = "srcCluster"
SOURCE = {"bootstrap.servers": "dc1:9092"}
TARGET = {"bootstrap.servers": "dc2:9092"}
DEST = "dc1.orders"


def copy(dest_offset: int, origin_offset: int, cluster: str = SRC, partition: int = 0, ts: int = 0) -> FakeMessage:
    headers = [("trace", b"t"), (HEADER, Hop(cluster, "orders", partition, origin_offset, 1).encode())]
    return FakeMessage(DEST, 0, dest_offset, b"k", b"copy", headers, ts)


def local(dest_offset: int, ts: int = 0) -> FakeMessage:
    return FakeMessage(DEST, 0, dest_offset, b"k", b"local", None, ts)


def translate(
    readers: dict[str, FakeConsumer],
    monkeypatch: pytest.MonkeyPatch,
    *wanted: int,
    provenance: bool = True,
    source_end: int = 1000,
    unseen_from: int | None = None,
) -> list[int]:
    """`readers` by bootstrap address: dc2's the destination, dc1's the source (by default `source_end` records
    without provenance)."""
    plain = [FakeMessage("orders", 0, o, b"k", b"v", None, 0) for o in range(source_end)]
    readers = {"dc1:9092": FakeConsumer().add("orders", 0, plain), **readers}
    monkeypatch.setattr(offsets, "_reader", lambda config: readers[config["bootstrap.servers"]])
    request = PartitionRequest(SOURCE, TARGET, SRC, "orders", 0, DEST, wanted, source_end, provenance, unseen_from)
    result = translate_partition(request)
    assert [(t.topic, t.partition, t.source_offset, t.dest_topic) for t in result] == [
        ("orders", 0, o, DEST) for o in wanted
    ]
    assert {t.method for t in result} == {"provenance" if provenance else "timestamp"}
    return [t.dest_offset for t in result]


# Destination partition: copies of srcCluster:orders-0 (origin offsets 10, 11, 14, 15; 12 and 13 were filtered),
# with local records and another origin's copies in between, and local records after the last copy.
MIXED = [
    local(0),
    copy(1, 10),
    local(2),
    copy(3, 12, partition=1),
    copy(4, 11),
    copy(5, 14),
    copy(6, 13, cluster="otherCluster"),
    copy(7, 15),
    local(8),
    local(9),
]


@pytest.mark.parametrize(
    ("origin", "dest"),
    [
        (0, 1),  # before the first copy: the first copy
        (9, 1),
        (10, 1),  # exactly on a copy
        (11, 4),  # local records and another origin's copy before it are passed over
        (12, 5),  # filtered at copy time: the next copy
        (13, 5),
        (14, 5),
        (15, 7),  # the last copy
        (16, 8),  # past the last copy: right after it
        (10_000, 8),
    ],
)
def test_group_resumes_at_the_first_copy_with_origin_at_or_after_its_offset(monkeypatch, origin, dest) -> None:
    readers = {"dc2:9092": FakeConsumer().add(DEST, 0, MIXED)}
    assert translate(readers, monkeypatch, origin) == [dest]


def test_many_groups_of_one_partition_in_one_request(monkeypatch) -> None:
    readers = {"dc2:9092": FakeConsumer().add(DEST, 0, MIXED)}
    assert translate(readers, monkeypatch, 16, 11, 0, 11, 14, 10) == [8, 4, 1, 4, 5, 1]


def test_log_start_past_the_early_copies(monkeypatch) -> None:
    readers = {"dc2:9092": FakeConsumer().add(DEST, 0, MIXED[5:], low=5)}  # retention deleted 0..4
    assert translate(readers, monkeypatch, 0, 14, 15, 16) == [5, 5, 7, 8]


def test_copies_up_to_the_end_of_the_log(monkeypatch) -> None:
    readers = {"dc2:9092": FakeConsumer().add(DEST, 0, [copy(0, 3), copy(1, 4), copy(2, 5)])}
    assert translate(readers, monkeypatch, 2, 5, 6, 7) == [0, 2, 3, 3]


def test_destination_end_after_transaction_markers(monkeypatch) -> None:
    readers = {"dc2:9092": FakeConsumer().add(DEST, 0, [copy(0, 3), copy(2, 4)], high=4)}  # 1, 3: markers
    assert translate(readers, monkeypatch, 4, 5) == [2, 3]


def test_nothing_copied_resumes_at_the_log_start(monkeypatch) -> None:
    only_local = FakeConsumer().add(DEST, 0, [local(d) for d in range(3, 6)], low=3)
    assert translate({"dc2:9092": only_local}, monkeypatch, 0, 7) == [3, 3]
    empty = FakeConsumer().add(DEST, 0, [], low=4, high=4)
    assert translate({"dc2:9092": empty}, monkeypatch, 0) == [4]


def test_a_failback_resumes_at_the_first_record_the_group_never_saw(monkeypatch) -> None:
    """The restored cluster after producers moved back (its ends were 2 then): the last copies of the serving
    cluster's records land after records the producers wrote there, which the group reading the serving cluster never
    saw. The group resumes at the first of them (and reads the copies after it twice) rather than skip them."""
    restored = [copy(0, 10), copy(1, 11), local(2), copy(3, 12), local(4), copy(5, 13)]
    readers = {"dc2:9092": FakeConsumer().add(DEST, 0, restored)}
    assert translate(readers, monkeypatch, 14, 11, 13, unseen_from=2) == [2, 1, 2]
    assert translate(readers, monkeypatch, 14, unseen_from=6) == [6]  # nothing written since: after the last copy
    assert translate(readers, monkeypatch, 14) == [6]  # without the mark, the local records 2 and 4 are skipped


def test_a_group_that_read_copies_of_the_destinations_own_records_resumes_after_their_originals(monkeypatch) -> None:
    """A failback after a planned failover with nothing new in the serving cluster: its partition holds copies of the
    restored cluster's records (originals at 0..4 there), and nothing was copied back. A group that read three of
    them resumes after the third one's original, not at the log start; one that read them all, after the last."""
    hop = [(HEADER, Hop("dstCluster", DEST, 0, o, 1).encode()) for o in range(5)]
    serving = FakeConsumer().add("orders", 0, [FakeMessage("orders", 0, o, b"k", b"v", [hop[o]], 0) for o in range(5)])
    restored = FakeConsumer(cluster_id="dstCluster").add(DEST, 0, [local(d) for d in range(5)])
    assert translate({"dc1:9092": serving, "dc2:9092": restored}, monkeypatch, 3, 5, 0, source_end=5) == [3, 5, 0]
    elsewhere = FakeConsumer(cluster_id="otherCluster").add(DEST, 0, [local(d) for d in range(5)])
    assert translate({"dc1:9092": serving, "dc2:9092": elsewhere}, monkeypatch, 3, source_end=5) == [0]  # not its


def test_in_a_failback_a_group_among_copies_of_the_destinations_records_resumes_at_the_next_one(monkeypatch) -> None:
    """A failback after a planned failover and an outage: the serving cluster holds copies of the restored cluster's
    records 0..4, then its own 5..7, which the resync copied to the restored cluster after its own 0..4. A group that
    read three of the copies resumes at the restored cluster's record 3, not at the first copy after it (5): records
    3 and 4 were never read. One that read all five, or into the serving cluster's own, resumes at the copies."""
    hop = [(HEADER, Hop("dstCluster", DEST, 0, o, 1).encode()) for o in range(5)]
    serving = FakeConsumer().add(
        "orders", 0, [FakeMessage("orders", 0, o, b"k", b"v", [hop[o]] if o < 5 else None, 0) for o in range(8)]
    )
    restored = FakeConsumer(cluster_id="dstCluster").add(
        DEST, 0, [*map(local, range(5)), *(copy(o, o) for o in (5, 6, 7))]
    )
    readers = {"dc1:9092": serving, "dc2:9092": restored}
    assert translate(readers, monkeypatch, 0, 3, 5, 6, 8, source_end=8, unseen_from=5) == [0, 3, 5, 6, 8]


def test_search_is_binary_then_one_forward_read(monkeypatch) -> None:
    n = 1024
    reader = FakeConsumer().add(DEST, 0, [copy(d, 2 * d) for d in range(n)])  # every other origin offset filtered
    readers = {"dc2:9092": reader}
    assert translate(readers, monkeypatch, 1001, 1500) == [501, 750]
    assert len(reader.assignments) <= math.ceil(math.log2(n)) + 1 + 1  # search steps + the forward read
    assert reader.assignments[-1] == (DEST, 0, 501)  # the forward read starts at the first answer


# Without provenance: the timestamp of the source record at O, looked up with offsetsForTimes semantics.


def source_records(*timestamps: int) -> FakeConsumer:
    return FakeConsumer().add(
        "orders", 0, [FakeMessage("orders", 0, o, b"k", b"v", None, ts) for o, ts in enumerate(timestamps)]
    )


def test_timestamp_fallback(monkeypatch) -> None:
    source = source_records(100, 200, 300, 400, 500)
    dest = FakeConsumer().add(DEST, 0, [local(0, 90), local(1, 150), local(2, 300), local(3, 300), local(4, 450)])
    readers = {"dc1:9092": source, "dc2:9092": dest}
    assert translate(readers, monkeypatch, 0, 1, 2, 3, 4, 5, provenance=False, source_end=5) == [1, 2, 2, 4, 5, 5]
    # 0 -> ts 100 -> first >= 100 is 150 at 1; 2 -> 300 at 2 (the first of equal times); 3 -> 400 -> 450 at 4;
    # 4 -> 500, later than everything: the end; 5 is the source end: the end


def test_timestamp_fallback_reads_the_next_record_after_a_gap(monkeypatch) -> None:
    source = FakeConsumer().add(
        "orders",
        0,
        [FakeMessage("orders", 0, 0, None, b"v", None, 100), FakeMessage("orders", 0, 3, None, b"v", None, 400)],
        high=5,
    )
    dest = FakeConsumer().add(DEST, 0, [local(0, 100), local(1, 400), local(2, 500)])
    readers = {"dc1:9092": source, "dc2:9092": dest}
    assert translate(readers, monkeypatch, 1, 4, provenance=False, source_end=5) == [1, 3]  # 4: past the last record
