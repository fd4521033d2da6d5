"""How a health run keeps and finds its history in `_kdr.health`, which every flow of the target shares (one record
per flow and run, rows of samples), and which destination partitions it reads for the cycle check."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from support.fakes import FakeMessage

from kafka_dr.health import sampler
from kafka_dr.health.rules import WINDOW, PartitionSample
from kafka_dr.health.sampler import CYCLE_SAMPLE, _cycles, _windows_in, sample_records
from kafka_dr.replication.internal import HEALTH
from kafka_dr.replication.provenance import HEADER, Hop

ORDERS = [("orders", 0), ("orders", 1)]


def sample(run: int, partition: int, **changes: object) -> PartitionSample:
    """Run r's sample of orders[partition]: taken at r * 1000, lag r."""
    fields = {"dest_end": 100 + run, "cycle_offset": None} | changes
    return PartitionSample(run * 1000, "orders", partition, "orders", 0, run, 0, run, 0.5, None, **fields)


def records(flow: str, runs: range, partitions: list[int]) -> list[FakeMessage]:
    """The `_kdr.health` records the runs write, encoded as put_many encodes them."""
    out = []
    for run in runs:
        for topic, key, value in sample_records(flow, [sample(run, p) for p in partitions]):
            encoded = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
            out.append(FakeMessage(topic, 0, len(out), key, encoded))
    return out


def test_samples_read_back_as_they_were_written() -> None:
    written = [sample(3, 0, cycle_offset=102), sample(3, 1, dest_end=None)]
    found, _ = _windows_in(_encoded("a", written), "a", ORDERS)
    assert found == {("orders", 0): [written[0]], ("orders", 1): [written[1]]}


def test_the_newest_window_of_each_partition_oldest_first_among_other_flows_records() -> None:
    mine, other = records("a", range(15), [0, 1]), records("b", range(15), [0])
    interleaved = [m for pair in zip(mine, other, strict=True) for m in pair]
    windows, complete = _windows_in(interleaved, "a", ORDERS)
    assert complete
    assert [s.lag_records for s in windows[("orders", 0)]] == list(range(5, 15))
    assert [s.lag_records for s in windows[("orders", 1)]] == list(range(5, 15))


def test_a_partition_younger_than_the_window_does_not_make_it_incomplete() -> None:
    history = records("a", range(12), [0]) + records("a", range(12, 15), [0, 1])
    windows, complete = _windows_in(history, "a", ORDERS)
    assert complete and [s.lag_records for s in windows[("orders", 1)]] == [12, 13, 14]


def test_a_tail_that_cuts_into_the_window_is_incomplete() -> None:
    history = records("a", range(20), [0, 1])
    assert not _windows_in(history[-WINDOW:], "a", ORDERS)[1]
    assert _windows_in(history[-WINDOW - 1 :], "a", ORDERS)[1]
    assert _windows_in([], "a", [("orders", 0)]) == ({("orders", 0): []}, False)


def test_a_wide_run_is_several_records_and_reads_back_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sampler, "RUN_CHUNK", 2)
    history = records("a", range(12), [0, 1, 2, 3, 4])
    assert len(history) == 12 * 3 and sampler._health_span(5) == (WINDOW + 1) * (3 + 1)
    windows, complete = _windows_in(history[-sampler._health_span(5) :], "a", [("orders", p) for p in range(5)])
    assert complete and all([s.lag_records for s in w] == list(range(2, 12)) for w in windows.values())


def test_columns_are_read_by_name() -> None:
    written = sample(1, 0, cycle_offset=7)
    [(_, key, value)] = sample_records("a", [written])
    shuffled = list(reversed(value["columns"]))
    value = value | {"columns": shuffled, "rows": [list(reversed(value["rows"][0]))]}
    message = FakeMessage(HEALTH, 0, 0, key, json.dumps(value).encode())
    assert _windows_in([message], "a", [("orders", 0)])[0] == {("orders", 0): [written]}


class FakeTarget:
    """The target's `scan`: the newest records of the ranges asked, each naming a hop (cluster, topic)."""

    def __init__(self, names: dict[tuple[str, int], tuple[str, str]]) -> None:
        self.names, self.asked = names, []

    def scan(self, ranges: dict[tuple[str, int], tuple[int, int]]) -> Iterator[FakeMessage]:
        self.asked.append(ranges)
        for (topic, partition), (start, end) in ranges.items():
            cluster, named_topic = self.names.get((topic, partition), ("dc1-id", topic))
            for offset in range(start, end):
                hop = Hop(cluster, named_topic, partition, offset, 0).encode()
                yield FakeMessage(topic, partition, offset, headers=[(HEADER, hop)])


def test_only_partitions_that_moved_since_the_last_sample_are_read_for_a_cycle() -> None:
    target = FakeTarget({("orders", 1): ("dc2-id", "orders")})  # orders[1] holds copies naming dc2's orders
    history = {("orders", 0): [sample(1, 0)], ("orders", 1): [sample(1, 1)]}
    found = _cycles(target, "dc2-id", {("orders", 0): 101, ("orders", 1): 130}, history)  # type: ignore[arg-type]
    assert target.asked == [{("orders", 1): (130 - CYCLE_SAMPLE, 130)}]
    assert found == {("orders", 0): None, ("orders", 1): 129}


def test_an_unmoved_partition_keeps_the_cycle_its_last_sample_found_and_a_new_one_is_read_whole() -> None:
    target = FakeTarget({})
    history = {("orders", 0): [sample(1, 0, cycle_offset=100)], ("orders", 1): []}
    found = _cycles(target, "dc2-id", {("orders", 0): 101, ("orders", 1): 3}, history)  # type: ignore[arg-type]
    assert target.asked == [{("orders", 1): (0, 3)}]
    assert found == {("orders", 0): 100, ("orders", 1): None}


def _encoded(flow: str, samples: list[PartitionSample]) -> list[FakeMessage]:
    return [
        FakeMessage(topic, 0, i, key, json.dumps(value).encode())
        for i, (topic, key, value) in enumerate(sample_records(flow, samples))
    ]
