"""Checkpoint passes on an embedded broker: a writer that remembers what it wrote writes a checkpoint again only when
its translation moved, so `_kdr.checkpoints` grows with what changes and not with the number of passes; yet a reader
dates every checkpoint of the flow's member groups by the newest pass that confirmed it, and a group that left the
flow (or a pass over some groups only) keeps the date it was made."""

from __future__ import annotations

import pytest

from kafka_dr.replication.internal import CHECKPOINTS, read_records
from kafka_dr.translation.checkpoints import dated_checkpoints_in, load_pass_time, write_checkpoints
from kafka_dr.translation.offsets import Translated

pytestmark = pytest.mark.integration


def at(offset: int, partition: int = 0) -> Translated:
    return Translated("orders", partition, offset, "orders", offset + 7, "provenance")


def dates(config: dict, flow: str) -> dict[str, list[tuple[int, int]]]:
    """Per group: (destination offset, date) of each checkpoint."""
    dated, _ = dated_checkpoints_in(read_records(config, CHECKPOINTS), flow)
    return {group: [(t.dest_offset, at_ms) for t, at_ms in found] for group, found in dated.items()}


def flow_records(config: dict, flow: str) -> int:
    return sum(1 for m in read_records(config, CHECKPOINTS) if (m.key() or b"").startswith(flow.encode()))


def test_unchanged_checkpoints_are_not_written_again_and_are_dated_by_the_pass_that_confirmed_them(broker_pair):
    config, flow, written = broker_pair.dc2.config, "ckpt-writes", {}
    groups = {"billing": [at(10), at(20, 1)], "audit": [at(5)]}
    assert write_checkpoints(config, flow, groups, 1_000, written, all_groups=True) == 3
    before = flow_records(config, flow)  # 3 checkpoints, the members, the pass
    assert before == 5

    assert write_checkpoints(config, flow, groups, 2_000, written, all_groups=True) == 0
    assert flow_records(config, flow) == before + 1  # the pass record alone
    assert dates(config, flow) == {"audit": [(12, 2_000)], "billing": [(17, 2_000), (27, 2_000)]}

    moved = {"billing": [at(15), at(20, 1)]}  # audit left the source; billing's partition 0 moved
    assert write_checkpoints(config, flow, moved, 3_000, written, all_groups=True) == 1
    assert dates(config, flow) == {"audit": [(12, 1_000)], "billing": [(22, 3_000), (27, 3_000)]}

    assert write_checkpoints(config, flow, {"billing": [at(15)]}, 4_000, written) == 0  # some groups only
    assert dates(config, flow) == {"audit": [(12, 1_000)], "billing": [(22, 3_000), (27, 1_000)]}


def test_a_writer_without_memory_writes_every_checkpoint(broker_pair):
    config, flow = broker_pair.dc2.config, "ckpt-full"
    groups = {"billing": [at(10)]}
    assert write_checkpoints(config, flow, groups, 1_000, all_groups=True) == 1
    assert write_checkpoints(config, flow, groups, 2_000, all_groups=True) == 1
    assert dates(config, flow) == {"billing": [(17, 2_000)]}


def test_the_newest_pass_is_read_back_from_the_end_past_other_flows_checkpoints(broker_pair):
    """What a health run asks when other flows wrote more than its tail read since this flow's last pass."""
    config = broker_pair.dc2.config
    write_checkpoints(config, "ckpt-quiet", {"billing": [at(10)]}, 5_000, all_groups=True)
    busy = {f"g{i}": [at(i, p) for p in range(6)] for i in range(400)}  # 2,400 checkpoints after it
    write_checkpoints(config, "ckpt-busy", busy, 6_000, all_groups=True)
    assert load_pass_time(config, "ckpt-quiet") == 5_000
    assert load_pass_time(config, "ckpt-never") is None
