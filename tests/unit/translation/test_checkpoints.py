"""`_kdr.checkpoints` as the health check reads it: a pass of the checkpointer counts even when the flow's source
had no group to translate (else max_checkpoint_age_s would say "no checkpoint yet" forever). And the checkpoint task
of a continuous replicator: when it passes, and that a failed pass does not end it."""

from __future__ import annotations

import json
import logging
import threading
import time
import types

import yaml
from support.fakes import FakeMessage
from support.topology import topology_text

from kafka_dr.access import ClusterAccess
from kafka_dr.topology import parse_topology
from kafka_dr.translation import checkpoints
from kafka_dr.translation.checkpoints import CheckpointTask, checkpoint_key, checkpoints_in, pass_time_in

FLOWS = '  - {name: dc1-to-dc2, source: dc1, target: dc2, topics: {include: ["orders"]}}'
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


def test_the_newest_pass_of_the_flow_is_its_last_pass_record_whatever_other_flows_wrote() -> None:
    records = [
        record(0, b"f", {"at_ms": 3_000, "groups": 1}),
        record(1, checkpoint_key("f", "g", "t", 0), {**CHECKPOINT, "group": "g", "at_ms": 4_000}),
        record(2, b"f2", {"at_ms": 9_000, "groups": 0}),
        record(3, b"f", {"at_ms": 4_000, "groups": 1}),
    ]
    assert pass_time_in(records, "f") == 4_000
    assert pass_time_in(records[:3], "f") == 3_000 and pass_time_in(records[2:3], "f") is None


class Passes:
    """Stands in for checkpoint_groups: counts passes; the ones listed in `failing` raise; each waits for `gate`."""

    def __init__(self, failing: tuple[int, ...] = (), gate: threading.Event | None = None) -> None:
        self.calls: list[dict] = []
        self.failing, self.gate = failing, gate

    def __call__(self, topology, flow, pattern, retries: int, written: dict) -> dict:
        self.calls.append({"pattern": pattern, "retries": retries})
        if self.gate is not None:
            self.gate.wait(5)
        if len(self.calls) in self.failing:
            raise RuntimeError("source cluster dc1 unreachable after 1 attempt")
        return {"billing": []}


FLOW = types.SimpleNamespace(name="f")


def test_the_checkpoint_task_passes_at_start_then_every_interval_and_outlives_failed_passes(caplog) -> None:
    caplog.set_level(logging.INFO, logger="kafka_dr.translation.checkpoints")
    stop, passes = threading.Event(), Passes(failing=(2,))
    task = CheckpointTask(None, FLOW, 0.01, stop, passes)  # type: ignore[arg-type]
    task.start()
    deadline = time.monotonic() + 5
    while len(passes.calls) < 4:
        assert time.monotonic() < deadline, f"{len(passes.calls)} passes in 5 s"
        time.sleep(0.01)
    stop.set()
    task.thread.join(5)
    assert not task.thread.is_alive()
    assert passes.calls[0] == {"pattern": None, "retries": 1}  # every group of the flow, one attempt per pass
    assert "flow f: group offsets not checkpointed: source cluster dc1 unreachable after 1 attempt" in caplog.text
    assert "flow f: checkpointed 1 groups" in caplog.text


def test_no_interval_no_checkpoint_task_and_no_last_pass() -> None:
    passes = Passes()
    task = CheckpointTask(None, FLOW, 0, threading.Event(), passes)  # type: ignore[arg-type]
    task.start()
    task.last_pass()
    assert passes.calls == [] and not task.thread.is_alive()


def test_the_last_pass_comes_after_the_pass_under_way() -> None:
    stop, gate = threading.Event(), threading.Event()
    passes = Passes(gate=gate)
    task = CheckpointTask(None, FLOW, 3600, stop, passes)  # type: ignore[arg-type]
    task.start()
    stop.set()  # the run stopped while its first pass is under way
    threading.Timer(0.05, gate.set).start()
    task.last_pass(wait=5)
    assert len(passes.calls) == 2 and not task.thread.is_alive()


def test_no_last_pass_while_the_pass_under_way_outlasts_the_wait() -> None:
    stop, gate = threading.Event(), threading.Event()
    passes = Passes(gate=gate)
    task = CheckpointTask(None, FLOW, 3600, stop, passes)  # type: ignore[arg-type]
    task.start()
    stop.set()
    task.last_pass(wait=0.05)
    assert len(passes.calls) == 1  # the pass under way is the last one
    gate.set()
    task.thread.join(5)


def test_a_pass_stamps_its_checkpoints_with_when_it_read_the_source_not_when_it_wrote_them(monkeypatch) -> None:
    """A pass slowed down by a loaded source must not make its checkpoints look fresher than the commits they hold:
    a disaster's offsets are as old as the read (found by the MirrorMaker 2 benchmark: a 30 s old translation shown
    as 3 s old)."""
    topology = parse_topology(yaml.safe_load(topology_text({"dc1": "127.0.0.1:1", "dc2": "127.0.0.1:2"}, FLOWS)))
    now = [1_000.0]
    stamped: list[int] = []

    def slow_translation(*_args, **_kwargs) -> dict:
        now[0] += 30.0
        return {}

    monkeypatch.setattr(checkpoints.time, "time", lambda: now[0])
    monkeypatch.setattr(checkpoints, "translate_from_source", slow_translation)
    monkeypatch.setattr(checkpoints, "write_checkpoints", lambda _c, _f, _g, at_ms, *_a, **_k: stamped.append(at_ms))
    monkeypatch.setattr(checkpoints, "flow_lag", lambda *_a: None)
    monkeypatch.setattr(checkpoints, "save_snapshot", lambda *_a: None)
    checkpoints.checkpoint_groups(ClusterAccess.from_environ(topology), topology.flow("dc1-to-dc2"), None)
    assert stamped == [1_000_000]
