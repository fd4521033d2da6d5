"""Broker robustness at the wire level: garbage closes only the offending connection; an
ApiVersions request at a version the broker does not know gets UNSUPPORTED_VERSION (35) in a v0
response, on a connection that stays usable (that is how clients negotiate down)."""

from __future__ import annotations

import contextlib
import random
import struct

import pytest

from . import kafka_wire as wire
from .clients import Record, past_ts, unique

pytestmark = pytest.mark.integration

UNSUPPORTED_VERSION = 35


def garbage_payloads() -> dict[str, bytes]:
    rng = random.Random(1234)
    return {
        "negative frame size": b"\xff\xff\xff\xff" + rng.randbytes(32),
        "http request (frame size > socket.request.max.bytes)": b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "unknown api key": wire.frame(struct.pack(">hhih", 0x7ABC, 0, 1, 4) + b"junk" + rng.randbytes(64)),
        "frame too short for a request header": wire.frame(b"\x00\x12\x00"),
        "metadata v1 with a truncated body": wire.frame(wire.request_header(wire.METADATA, 1, 5) + b"\x7f\xff\xff\xff"),
        "random bytes in a well-sized frame": wire.frame(b"\xab\xcd" + rng.randbytes(4094)),
    }


def api_versions_ok(sock, correlation_id: int) -> bool:
    sock.sendall(wire.api_versions_request(0, correlation_id))
    corr, err, keys, _ = wire.parse_api_versions_v0(wire.recv_frame(sock))
    return corr == correlation_id and err == 0 and wire.API_VERSIONS in keys


@pytest.mark.parametrize("case", list(garbage_payloads()))
def test_garbage_closes_only_that_connection(client, bootstrap, case):
    witness = wire.connect(bootstrap)
    try:
        assert api_versions_ok(witness, 1)
        bad = wire.connect(bootstrap)
        try:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # already closed on us: fine
                bad.sendall(garbage_payloads()[case])
            assert wire.is_closed_by_peer(bad, timeout=10), f"{case}: broker kept the connection open"
        finally:
            bad.close()
        # The connection opened before the garbage still works, and so do new clients.
        assert api_versions_ok(witness, 2), f"{case}: an unrelated connection was disturbed"
    finally:
        witness.close()
    topic = unique("after-garbage")
    client.create_topic(topic, 1)
    ts = past_ts()
    assert client.produce(topic, [Record(key=b"k", value=b"still alive", timestamp_ms=ts, partition=0)]) == [(0, 0)]
    [got] = client.consume(topic, 0, 0, 1)
    assert got.content() == (b"k", b"still alive", (), ts)


def test_unsupported_api_versions_version_gets_error_35_in_v0_response(bootstrap):
    sock = wire.connect(bootstrap)
    try:
        sock.sendall(wire.api_versions_request(0, 100))
        corr, err, keys, rest = wire.parse_api_versions_v0(wire.recv_frame(sock))
        assert (corr, err, rest) == (100, 0, 0)
        lo, hi = keys[wire.API_VERSIONS]
        assert lo == 0 and hi >= 3, f"ApiVersions versions {lo}..{hi}: clients need v3"

        for cid, version in ((101, hi + 1), (102, 127)):
            sock.sendall(wire.api_versions_request(version, cid))
            corr, err, err_keys, rest = wire.parse_api_versions_v0(wire.recv_frame(sock))
            assert corr == cid
            assert err == UNSUPPORTED_VERSION, f"ApiVersions v{version}: error {err}"
            assert rest == 0, f"ApiVersions v{version}: response is not in the v0 layout ({rest} bytes extra)"
            assert err_keys.get(wire.API_VERSIONS) == (lo, hi), err_keys
            assert err_keys == keys

        # The connection stays open: the client retries with a version the broker supports.
        sock.sendall(wire.api_versions_request(0, 103))
        assert wire.parse_api_versions_v0(wire.recv_frame(sock))[:2] == (103, 0)
        sock.sendall(wire.api_versions_request(3, 104))
        corr, err, v3_keys = wire.parse_api_versions_v3(wire.recv_frame(sock))
        assert (corr, err) == (104, 0)
        assert v3_keys == keys
    finally:
        sock.close()


def test_fetch_long_polls_until_data_or_max_wait(client, bootstrap):
    """Fetch with min_bytes=1 at the end of the log waits up to max_wait_ms (Kafka's long poll) instead
    of answering at once, and answers as soon as data arrives."""
    import threading
    import time

    topic = unique("longpoll")
    client.create_topic(topic, 1)

    def fetch_at_end(max_wait_ms: int) -> tuple[float, dict]:
        body = (
            struct.pack(">iiiib", -1, max_wait_ms, 1, 1 << 20, 0)
            + struct.pack(">i", 1)
            + struct.pack(">h", len(topic))
            + topic.encode()
            + struct.pack(">i", 1)
            + struct.pack(">iqi", 0, 0, 1 << 20)
        )
        with wire.connect(bootstrap) as s:
            t0 = time.monotonic()
            resp = wire.parse_fetch_v4(wire.call(s, wire.frame(wire.request_header(wire.FETCH, 4, 1) + body)))
            return time.monotonic() - t0, resp

    elapsed, resp = fetch_at_end(800)
    assert resp["error_code"] == 0 and resp["records"] == b""
    assert 0.6 <= elapsed < 5, f"empty fetch answered after {elapsed:.2f}s with max_wait_ms=800"

    timer = threading.Timer(
        0.5, lambda: client.produce(topic, [Record(key=None, value=b"wake", timestamp_ms=past_ts(), partition=0)])
    )
    timer.start()
    try:
        elapsed, resp = fetch_at_end(10_000)
    finally:
        timer.join()
    assert resp["high_watermark"] == 1 and wire.decode_batch_headers(resp["records"]), resp
    assert elapsed < 5, f"fetch held for {elapsed:.2f}s after data arrived (max_wait_ms=10000)"
