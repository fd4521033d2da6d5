"""Whether anything still copies a flow, from its target's `_kdr.progress` alone (replication/activity.py), on a fake
consumer: the progress and claim records each flow's replicators appended during the window."""

from __future__ import annotations

import pytest
from support.fakes import FakeConsumer, FakeMessage, patch_sleep

from kafka_dr.replication import activity
from kafka_dr.replication.activity import Activity, watch
from kafka_dr.replication.internal import PROGRESS, owner_key, partition_key, start_key


def progress(offset: int, key: bytes) -> FakeMessage:
    return FakeMessage(PROGRESS, 0, offset, key, b"{}")


def watched(monkeypatch: pytest.MonkeyPatch, log: list[FakeMessage], start: int, end: int, flows: list[str]) -> dict:
    """watch() over `log`, whose end offset is `start` when the window opens and `end` when it closes."""
    ends = iter([start, end])
    waited: list[float] = []
    monkeypatch.setattr(activity, "AdminClient", lambda config: object())
    monkeypatch.setattr(
        activity, "end_offsets", lambda admin, partitions, isolation, timeout: {partitions[0]: next(ends)}
    )
    patch_sleep(monkeypatch, activity, waited.append)
    reader = FakeConsumer().add(PROGRESS, 0, log)
    monkeypatch.setattr(activity, "Consumer", lambda config: reader)
    result = watch({"bootstrap.servers": "dc2:9092"}, flows, window=6.0)
    assert waited == [6.0]
    return result


def test_progress_and_claim_records_appended_during_the_window_count_per_flow(monkeypatch) -> None:
    log = [
        progress(0, partition_key("f", "orders", 0)),  # before the window
        progress(1, partition_key("f", "orders", 0)),
        progress(2, owner_key("f")),
        progress(3, partition_key("g", "orders.replica", 12)),
        progress(4, start_key("f")),  # a start marker is no sign of a running replicator
        progress(5, partition_key("other", "orders", 1)),  # a flow not asked about
        progress(6, b"f/orders/not-a-partition"),
        progress(7, partition_key("f", "payments", 3)),
        progress(8, owner_key("g")),  # after the window
    ]
    assert watched(monkeypatch, log, 1, 8, ["f", "g", "idle"]) == {
        "f": Activity("f", 3, "f/payments/3"),
        "g": Activity("g", 1, "g/orders.replica/12"),
        "idle": Activity("idle", 0, None),
    }


def test_nothing_appended_is_no_activity(monkeypatch) -> None:
    log = [progress(0, owner_key("f"))]
    assert watched(monkeypatch, log, 1, 1, ["f"]) == {"f": Activity("f", 0, None)}


def claims(monkeypatch: pytest.MonkeyPatch, log: list[FakeMessage], since: int) -> FakeConsumer:
    """wait_for_claim's consumer: `log` as `_kdr.progress`, read from `since`."""
    reader = FakeConsumer().add(PROGRESS, 0, log, low=0)
    monkeypatch.setattr(activity, "Consumer", lambda config: reader)
    return reader


def test_a_claim_of_the_flow_after_the_start_means_it_is_up(monkeypatch) -> None:
    log = [progress(0, owner_key("f")), progress(1, partition_key("f", "orders", 0)), progress(2, owner_key("g"))]
    log.append(progress(3, owner_key("f")))
    reader = claims(monkeypatch, log, since=1)
    assert activity.wait_for_claim({}, "f", 1, running=lambda: True, timeout=5) is True
    assert reader.assignments == [(PROGRESS, 0, 1)]  # the claim at 0 is an older replicator's


def test_a_replicator_gone_before_its_claim_is_not_up(monkeypatch) -> None:
    claims(monkeypatch, [progress(0, owner_key("f")), progress(1, owner_key("g"))], since=1)
    alive = iter([True, True, False])
    assert activity.wait_for_claim({}, "f", 1, running=lambda: next(alive), timeout=5) is False


def test_no_claim_within_the_timeout_raises(monkeypatch) -> None:
    claims(monkeypatch, [progress(0, owner_key("g"))], since=0)
    clock = iter(range(0, 100, 2))  # two seconds a look
    monkeypatch.setattr(activity.time, "monotonic", lambda: next(clock))
    with pytest.raises(TimeoutError, match="flow f: no claim in _kdr.progress within 5 s"):
        activity.wait_for_claim({}, "f", 0, running=lambda: True, timeout=5)
