"""kafka_dr.replication.heartbeat: heartbeat record values (the round trip, and one refusal for anything else), and
the heartbeat task of a continuous replicator (a heartbeat every interval until the run stops, and an outage logged
while replication goes on)."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest

from kafka_dr.replication.heartbeat import Heartbeat, HeartbeatError, HeartbeatTask, parse_heartbeat
from kafka_dr.replication.internal import HEARTBEATS


def test_heartbeat_value_round_trip() -> None:
    heartbeat = Heartbeat("dc1-to-dc2", "ab" * 16, 1_700_000_000_123)
    assert parse_heartbeat(heartbeat.encode()) == heartbeat
    assert json.loads(heartbeat.encode()) == {"flow": "dc1-to-dc2", "id": "ab" * 16, "created_ms": 1_700_000_000_123}


@pytest.mark.parametrize(
    "value",
    [None, b"", b"not json", b"[1]", b'{"flow": "f", "id": "x"}', b'{"flow": "f", "id": "x", "created_ms": "soon"}'],
)
def test_bad_heartbeat_value_is_refused(value: bytes | None) -> None:
    with pytest.raises(ValueError, match="not a heartbeat record value"):
        parse_heartbeat(value)


class Senders:
    """Stands in for HeartbeatSender: the first `unreachable` makings fail; sends listed in `failing` raise."""

    def __init__(self, unreachable: int = 0, failing: tuple[int, ...] = ()) -> None:
        self.made: list[tuple[dict, str]] = []
        self.sent = 0
        self.unreachable, self.failing = unreachable, failing
        self.last_written: tuple[int, int] | None = None

    def __call__(self, source_config: dict, flow: str) -> Senders:
        self.made.append((source_config, flow))
        if len(self.made) <= self.unreachable:
            raise HeartbeatError("cannot create _kdr.heartbeats on cluster dc1:9092: broker down")
        return self

    def send(self) -> None:
        self.sent += 1
        if self.sent in self.failing:
            raise HeartbeatError("heartbeat of flow f not written to _kdr.heartbeats on cluster dc1:9092: timed out")
        self.last_written = (0, 100 + self.sent)  # partition 0 at offset 101, 102...


def run_until(senders: Senders, sent: int) -> HeartbeatTask:
    stop = threading.Event()
    task = HeartbeatTask({"bootstrap.servers": "dc1:9092"}, "f", 0.01, stop, senders)
    task.start()
    deadline = time.monotonic() + 5
    while senders.sent < sent:
        assert time.monotonic() < deadline, f"{senders.sent} heartbeats in 5 s"
        time.sleep(0.01)
    stop.set()
    task.thread.join(5)
    assert not task.thread.is_alive()
    return task


def test_heartbeats_every_interval_with_one_sender_until_stopped() -> None:
    senders = Senders()
    run_until(senders, 3)
    assert senders.made == [({"bootstrap.servers": "dc1:9092"}, "f")]


def test_an_outage_is_logged_and_the_next_heartbeat_tried_again(caplog) -> None:
    caplog.set_level(logging.WARNING, logger="kafka_dr.replication.heartbeat")
    senders = Senders(unreachable=2, failing=(1,))
    run_until(senders, 3)
    assert len(senders.made) == 3  # made again after each failed making, then kept through a failed send
    assert caplog.text.count("heartbeat not sent: cannot create _kdr.heartbeats on cluster dc1:9092") == 2
    assert "heartbeat not sent: heartbeat of flow f not written" in caplog.text


def test_a_stopped_task_says_up_to_where_its_last_heartbeat_is_left_to_copy() -> None:
    senders = Senders()
    task = run_until(senders, 3)
    last = 100 + senders.sent
    # the next offset to copy is the last heartbeat's own: copy up to just past it
    assert task.uncopied({(HEARTBEATS, 0): last}) == {(HEARTBEATS, 0): last + 1}
    assert task.uncopied({(HEARTBEATS, 0): last + 1}) == {}
    assert task.uncopied({(HEARTBEATS, 1): 0, ("orders", 0): 0}) == {}  # not a partition this flow copies


def test_a_task_that_wrote_no_heartbeat_has_none_left_to_copy() -> None:
    task = run_until(Senders(unreachable=1000), 0)
    assert task.uncopied({(HEARTBEATS, 0): 0}) == {}
