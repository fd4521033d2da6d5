"""How a health run finds each partition's window in the tail of `_kdr.health`, which every flow of the target
shares: the newest WINDOW samples per partition, and whether the records read hold them all."""

from __future__ import annotations

import json

from support.fakes import FakeMessage

from kafka_dr.health.rules import WINDOW, PartitionSample
from kafka_dr.health.sampler import _windows_in
from kafka_dr.replication.internal import HEALTH, partition_key


def samples(flow: str, runs: range, partitions: list[int]) -> list[FakeMessage]:
    """One sample per partition per run, as each run writes them (run r at time r * 1000, lag r)."""
    out = []
    for run in runs:
        for p in partitions:
            sample = PartitionSample(run * 1000, "orders", p, "orders", 0, run, 0, run, 0.0, None)
            out.append(FakeMessage(HEALTH, 0, len(out), partition_key(flow, "orders", p), json.dumps(sample.to_dict())))
    return out


def test_the_newest_window_of_each_partition_oldest_first_among_other_flows_samples() -> None:
    mine, other = samples("a", range(15), [0, 1]), samples("b", range(15), [0])
    records = [m for pair in zip(mine, other + other, strict=True) for m in pair]
    windows, complete = _windows_in(records, "a", [("orders", 0), ("orders", 1)])
    assert complete
    assert [s.lag_records for s in windows[("orders", 0)]] == list(range(5, 15))
    assert [s.lag_records for s in windows[("orders", 1)]] == list(range(5, 15))


def test_a_partition_younger_than_the_window_does_not_make_it_incomplete() -> None:
    records = samples("a", range(12), [0]) + samples("a", range(12, 15), [0, 1])
    windows, complete = _windows_in(records, "a", [("orders", 0), ("orders", 1)])
    assert complete and [s.lag_records for s in windows[("orders", 1)]] == [12, 13, 14]


def test_a_tail_that_cuts_into_the_window_is_incomplete() -> None:
    records = samples("a", range(20), [0, 1])
    cut = records[-2 * WINDOW + 1 :]  # the oldest of the last WINDOW runs lost one of its samples
    assert not _windows_in(cut, "a", [("orders", 0), ("orders", 1)])[1]
    assert _windows_in(records[-2 * WINDOW - 1 :], "a", [("orders", 0), ("orders", 1)])[1]
    assert _windows_in([], "a", [("orders", 0)]) == ({("orders", 0): []}, False)
