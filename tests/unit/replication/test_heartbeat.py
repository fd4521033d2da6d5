"""Heartbeat record values: the round trip, and one refusal for anything else."""

from __future__ import annotations

import json

import pytest

from kafka_dr.replication.heartbeat import Heartbeat, parse_heartbeat


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
