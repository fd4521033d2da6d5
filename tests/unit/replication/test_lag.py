"""Pure rules of lag gating and its JSON form: no Kafka needed."""

from __future__ import annotations

import json

import pytest
from support.lag import IDLE, P0, P1, lag_of

from kafka_dr.replication.lag import FlowLag, check_thresholds


def test_totals() -> None:
    lag = lag_of(P0, P1, IDLE)
    assert (lag.total_records, lag.max_records, lag.max_seconds) == (90_040, 90_000, 12.25)
    empty = lag_of()
    assert (empty.total_records, empty.max_records, empty.max_seconds) == (0, 0, 0.0)


def test_json_round_trip_survives_serialisation() -> None:
    lag = lag_of(P0, P1, IDLE, heartbeat=None)
    data = json.loads(json.dumps(lag.to_json()))
    assert FlowLag.from_json(data) == lag
    assert data["total_records"] == 90_040 and data["partitions"][1]["estimated"] is True


def test_from_json_recomputes_totals() -> None:
    data = lag_of(P0).to_json() | {"total_records": 999, "max_seconds": 999.0}
    assert FlowLag.from_json(data).total_records == 40


def test_within_limits() -> None:
    ok, reason = check_thresholds(lag_of(P0, IDLE), max_records=40, max_seconds=3.5)  # limits are inclusive
    assert ok
    assert reason == "flow dc1-to-dc2: within limits (worst dc1:topic1[0] 40 records, dc1:topic1[0] 3.5 s)"


def test_records_limit_names_the_worst_partition() -> None:
    ok, reason = check_thresholds(lag_of(P0, P1, IDLE), max_records=1_000, max_seconds=None)
    assert not ok
    assert reason == "flow dc1-to-dc2: dc1:topic2[3] lags about 90,000 records (limit 1,000)"


def test_seconds_limit_names_the_worst_partition() -> None:
    ok, reason = check_thresholds(lag_of(P0, IDLE), max_records=None, max_seconds=1)
    assert not ok
    assert reason == "flow dc1-to-dc2: dc1:topic1[0] lags 3.5 s (limit 1 s)"


def test_both_limits_broken_are_both_reported() -> None:
    ok, reason = check_thresholds(lag_of(P0, P1), max_records=0, max_seconds=0)
    assert not ok and "90,000 records" in reason and "12.2 s" in reason and "\n" not in reason


def test_no_limits_and_no_partitions_pass() -> None:
    assert check_thresholds(lag_of(P1), None, None)[0]
    assert check_thresholds(lag_of(), 0, 0) == (True, "flow dc1-to-dc2: no source partitions to copy")


def test_negative_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="max_seconds must be >= 0, got -1"):
        check_thresholds(lag_of(P0), None, -1)
