"""How the driver ends a continuous epoch early (replication/epoch_end.py), over real loopback sockets: only the
epoch it ends, every later one after a stop, never a stranger, and a task copies on when the driver is not there."""

from __future__ import annotations

import dataclasses
import logging
import socket
import time
from collections.abc import Iterator

import pytest

from kafka_dr.replication.epoch_end import HELLO, EpochEnds, EpochWatch


@pytest.fixture
def ends() -> Iterator[EpochEnds]:
    driver = EpochEnds("127.0.0.1")
    yield driver
    driver.close()


def ended_within(watch: EpochWatch, seconds: float = 2.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if watch.ended():
            return True
        time.sleep(0.01)
    return False


def test_end_current_ends_the_latest_epoch_only(ends: EpochEnds) -> None:
    first = ends.ticket().watch()
    second_ticket = ends.ticket()
    second = second_ticket.watch()
    assert not first.ended() and not second.ended()
    ends.end_current()
    assert ended_within(second)
    assert ended_within(first)  # an earlier epoch still running ends with it (it is below the one ended)
    third = ends.ticket().watch()
    assert not ended_within(third, 0.3)  # the next epoch runs to its deadline
    assert second_ticket.epoch == 1 and not dataclasses.replace(second_ticket, epoch=5).watch().ended()


def test_end_all_ends_the_current_epoch_and_any_task_that_starts_later(ends: EpochEnds) -> None:
    running = ends.ticket().watch()
    ends.end_all()
    assert ended_within(running)
    assert ended_within(ends.ticket().watch())  # a task of the epoch that starts after the stop ends at once


def test_a_connection_without_the_runs_token_is_dropped_and_never_told(ends: EpochEnds) -> None:
    ticket = ends.ticket()
    stranger = socket.create_connection((ends.host, ends.port))
    stranger.sendall(HELLO.pack(b"x" * 16, ticket.epoch))
    stranger.settimeout(2)
    assert stranger.recv(1) == b""  # closed on the wrong token, before any end
    stranger.close()
    watch = ticket.watch()
    assert not ended_within(watch, 0.2)


def test_a_task_that_cannot_reach_the_driver_copies_to_the_deadline(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="kafka_dr.replication.epoch_end")
    driver = EpochEnds("127.0.0.1")
    ticket = driver.ticket()
    driver.close()  # nothing listens on its port any more
    watch = ticket.watch()
    assert not watch.ended()
    assert f"epoch 0: no word from the driver at 127.0.0.1:{ticket.port}" in caplog.text


def test_a_driver_that_goes_away_ends_the_epoch_of_its_tasks() -> None:
    driver = EpochEnds("127.0.0.1")
    watch = driver.ticket().watch()
    assert not ended_within(watch, 0.2)
    driver.close()
    assert ended_within(watch)
