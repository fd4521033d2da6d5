"""Local servers' ports come from below the kernel's ephemeral range: never a port an outgoing connection may take."""

from __future__ import annotations

import socket

import pytest

from kafka_dr_dev.local import ports


def test_a_free_port_is_below_the_ephemeral_range_and_bindable() -> None:
    start = ports._ephemeral_start()
    for _ in range(20):
        port = ports.free_port("127.0.0.1")
        assert ports.LOWEST <= port < start
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_ports_to_avoid_are_never_given(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn = iter([20_001, 20_001, 20_002])
    monkeypatch.setattr(ports.random, "randrange", lambda low, high: next(drawn))
    assert ports.free_port("127.0.0.1", frozenset({20_001})) == 20_002
