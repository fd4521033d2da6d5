"""ListOffsets conformance: lookups by timestamp are exact, plus the earliest (-2) / latest (-1) specs.

Kafka's contract: for a timestamp T the answer is the earliest offset whose record timestamp is >= T,
and offset -1 when there is no such record.  librdkafka passes that -1 through (OFFSET_END);
kafka-python turns it into None, which the adapter maps back to -1.
"""

from __future__ import annotations

import pytest

from .clients import Record, past_ts, unique

pytestmark = pytest.mark.integration


def expected_offset(timestamps: list[int], t: int) -> int:
    return next((off for off, ts in enumerate(timestamps) if ts >= t), -1)


def probe_points(timestamps: list[int]) -> list[int]:
    points = set()
    for ts in timestamps:
        points.update((ts - 1, ts, ts + 1))
    points.update((0, timestamps[0] - 10_000, timestamps[-1] + 1, timestamps[-1] + 10_000_000))
    return sorted(p for p in points if p >= 0)


def produce_with_timestamps(client, topic: str, timestamps: list[int], batch_records: int) -> None:
    records = [
        Record(key=None, value=f"r{i}".encode(), timestamp_ms=ts, partition=0) for i, ts in enumerate(timestamps)
    ]
    assert client.produce(topic, records, batch_records=batch_records) == [(0, i) for i in range(len(records))]


def nondecreasing_timestamps(base: int) -> list[int]:
    # Runs of equal timestamps (also across batch boundaries), gaps of various sizes.
    deltas = [0, 0, 0, 1, 0, 5, 0, 0, 2, 100, 0, 1, 1, 1, 0, 0, 0, 0, 3, 1000, 0, 7]
    out, ts = [], base
    for i in range(400):
        ts += deltas[i % len(deltas)]
        out.append(ts)
    return out


def test_offsets_for_times_exact(client, all_clients):
    topic = unique("lo-ts")
    client.create_topic(topic, 1)
    timestamps = nondecreasing_timestamps(past_ts())
    produce_with_timestamps(client, topic, timestamps, batch_records=30)
    points = probe_points(timestamps)
    for name, c in all_clients.items():
        for t in points:
            want = expected_offset(timestamps, t)
            assert c.offsets_for_times(topic, 0, t) == want, f"{client.name}->{name}: offsets_for_times({t})"
        # The admin ListOffsets path too (a sample: it is one request per lookup).
        for t in points[::7] + [timestamps[-1], timestamps[-1] + 1]:
            want = expected_offset(timestamps, t)
            assert c.list_offsets(topic, 0, t) == want, f"{client.name}->{name}: list_offsets({t})"


def test_offsets_for_times_out_of_order_timestamps(client):
    """CreateTime need not be monotonic: the answer is still the first offset (in log order) with ts >= T."""
    topic = unique("lo-ooo")
    client.create_topic(topic, 1)
    base = past_ts()
    timestamps = [base + d for d in (10, 20, 15, 30, 5, 40, 40, 35, 50, 45, 60, 55, 25, 70)]
    produce_with_timestamps(client, topic, timestamps, batch_records=4)
    for t in probe_points(timestamps):
        want = expected_offset(timestamps, t)
        assert client.offsets_for_times(topic, 0, t) == want, f"{client.name}: offsets_for_times({t})"


def test_earliest_and_latest(client, all_clients):
    topic = unique("lo-special")
    client.create_topic(topic, 2)
    base = past_ts()
    produce_with_timestamps(client, topic, [base + i for i in range(25)], batch_records=10)
    for name, c in all_clients.items():
        assert c.list_offsets(topic, 0, "earliest") == 0, name
        assert c.list_offsets(topic, 0, "latest") == 25, name
        assert c.watermarks(topic, 0) == (0, 25), name
        # Empty partition: earliest == latest == 0; no offset for any timestamp.
        assert c.list_offsets(topic, 1, "earliest") == 0, name
        assert c.list_offsets(topic, 1, "latest") == 0, name
        assert c.offsets_for_times(topic, 1, base) == -1, name
        assert c.offsets_for_times(topic, 1, 0) == -1, name
