"""`_kdr.checkpoints` as the health check reads it: a pass of the checkpointer counts even when the flow's source
had no group to translate (else max_checkpoint_age_s would say "no checkpoint yet" forever)."""

from __future__ import annotations

import json

from support.fakes import FakeMessage

from kafka_dr.translation.checkpoints import checkpoint_key, checkpoints_in

CHECKPOINT = {
    "topic": "t",
    "partition": 0,
    "source_offset": 5,
    "dest_topic": "t",
    "dest_offset": 5,
    "method": "provenance",
}


def record(offset: int, key: bytes, value: dict | None) -> FakeMessage:
    return FakeMessage("_kdr.checkpoints", 0, offset, key, None if value is None else json.dumps(value).encode())


def test_a_pass_without_groups_is_the_newest_checkpoint_time() -> None:
    records = [record(0, b"f", {"at_ms": 1_000, "groups": 0}), record(1, b"f", {"at_ms": 2_000, "groups": 0})]
    assert checkpoints_in(records, "f") == ({}, 2_000)


def test_other_flows_passes_and_group_checkpoints_keep_their_meaning() -> None:
    records = [
        record(0, checkpoint_key("f", "g", "t", 0), {**CHECKPOINT, "group": "g", "at_ms": 3_000}),
        record(1, b"f", {"at_ms": 3_000, "groups": 1}),
        record(2, b"f2", {"at_ms": 9_000, "groups": 0}),  # another flow, whose name starts like this one's
        record(3, b"f2/g/t/0", {**CHECKPOINT, "group": "g", "at_ms": 9_000}),
    ]
    groups, newest = checkpoints_in(records, "f")
    assert list(groups) == ["g"] and newest == 3_000
