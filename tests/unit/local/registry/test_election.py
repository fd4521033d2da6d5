"""The embedded registry's leader election over members' heartbeats."""

from __future__ import annotations

from kafka_dr_dev.local.registry.election import Member, elect


def test_election_picks_earliest_started_live_eligible_member():
    a = Member("http://127.0.0.1:1", True, "a", started_at=10.0, ts=100.0)
    b = Member("http://127.0.0.1:2", True, "b", started_at=5.0, ts=94.0)
    c = Member("http://127.0.0.1:3", False, "c", started_at=1.0, ts=100.0)
    assert elect([a, b, c], now=100.0) is a  # b's heartbeat is stale
    assert elect([a, b, c], now=98.0) is b
    assert elect([c], now=100.0) is None
    twin = Member("http://127.0.0.1:0", True, "t", started_at=10.0, ts=100.0)
    assert elect([a, twin], now=100.0) is twin
