"""Just enough of the Kafka wire protocol, written by hand, to poke a broker over a raw socket."""

from __future__ import annotations

import itertools
import socket
import struct
import time

API_VERSIONS = 18
METADATA = 3


def connect(bootstrap: str, timeout: float = 10.0) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=timeout)
    s.settimeout(timeout)
    return s


def request_header(
    api_key: int, version: int, correlation_id: int, client_id: str | None = "conformance", flexible: bool = False
) -> bytes:
    """Request header v1 (v2 when ``flexible``: an empty tagged-field section follows the client id)."""
    out = struct.pack(">hhi", api_key, version, correlation_id)
    if client_id is None:
        out += struct.pack(">h", -1)
    else:
        cid = client_id.encode()
        out += struct.pack(">h", len(cid)) + cid
    if flexible:
        out += b"\x00"
    return out


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def recv_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, size)


def api_versions_request(version: int, correlation_id: int) -> bytes:
    if version >= 3:
        body = _compact_string("kdr-conformance") + _compact_string("1.0") + b"\x00"
        return frame(request_header(API_VERSIONS, version, correlation_id, flexible=True) + body)
    return frame(request_header(API_VERSIONS, version, correlation_id))


def _compact_string(s: str) -> bytes:
    b = s.encode()
    return _uvarint(len(b) + 1) + b


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def parse_api_versions_v0(payload: bytes) -> tuple[int, int, dict[int, tuple[int, int]], int]:
    """(correlation_id, error_code, {api_key: (min, max)}, bytes left over) of a v0 response frame."""
    corr, err, n = struct.unpack_from(">ihi", payload, 0)
    pos = 10
    keys = {}
    for _ in range(max(n, 0)):
        k, lo, hi = struct.unpack_from(">hhh", payload, pos)
        keys[k] = (lo, hi)
        pos += 6
    return corr, err, keys, len(payload) - pos


def parse_api_versions_v3(payload: bytes) -> tuple[int, int, dict[int, tuple[int, int]]]:
    """(correlation_id, error_code, {api_key: (min, max)}) of a v3+ response (header v0, flexible body)."""
    corr, err = struct.unpack_from(">ih", payload, 0)
    pos = 6
    n, pos = _read_uvarint(payload, pos)
    keys = {}
    for _ in range(n - 1):
        k, lo, hi = struct.unpack_from(">hhh", payload, pos)
        pos += 6
        tags, pos = _read_uvarint(payload, pos)
        assert tags == 0
        keys[k] = (lo, hi)
    return corr, err, keys


def is_closed_by_peer(sock: socket.socket, timeout: float) -> bool:
    """True if the peer closes the connection (EOF or reset) within ``timeout`` seconds.

    Any bytes the broker sends before closing are read and ignored.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            if not sock.recv(65536):
                return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
    return False


# -- record batches (magic v2) ------------------------------------------------------------------------

PRODUCE = 0
FETCH = 1
INIT_PRODUCER_ID = 22


def _zigzag_varint(n: int) -> bytes:
    return _uvarint((n << 1) ^ (n >> 63))


def _read_zigzag(buf: bytes, pos: int) -> tuple[int, int]:
    v, pos = _read_uvarint(buf, pos)
    return (v >> 1) ^ -(v & 1), pos


def crc32c(data: bytes) -> int:
    try:
        import crc32c as _c

        return _c.crc32c(data)
    except ImportError:  # pragma: no cover - kafka-python ships a pure-python one
        from kafka.record.util import calc_crc32c

        return calc_crc32c(data)


def encode_batch(
    values: list[bytes],
    *,
    base_timestamp: int,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    base_offset: int = 0,
) -> bytes:
    """An uncompressed magic-v2 record batch of key-less records with the given values."""
    records = b""
    for i, v in enumerate(values):
        body = (
            b"\x00"
            + _zigzag_varint(0)
            + _zigzag_varint(i)
            + _zigzag_varint(-1)
            + _zigzag_varint(len(v))
            + v
            + _zigzag_varint(0)
        )
        records += _zigzag_varint(len(body)) + body
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            0,
            len(values) - 1,
            base_timestamp,
            base_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            len(values),
        )
        + records
    )
    crc = crc32c(after_crc)
    after_length = struct.pack(">ibI", -1, 2, crc) + after_crc
    return struct.pack(">qi", base_offset, len(after_length)) + after_length


def decode_batch_headers(data: bytes) -> list[dict]:
    """The headers of the complete magic-v2 batches in a fetch response's records (a partial tail is ignored)."""
    out, pos = [], 0
    while len(data) - pos >= 17:
        base_offset, length, _epoch, magic = struct.unpack_from(">qiib", data, pos)
        end = pos + 12 + length
        if end > len(data):
            break
        assert magic == 2, f"magic {magic} at offset {base_offset}"
        (crc,) = struct.unpack_from(">I", data, pos + 17)
        (attributes, last_delta, first_ts, max_ts, pid, pepoch, base_seq, count) = struct.unpack_from(
            ">hiqqqhii", data, pos + 21
        )
        out.append(
            {
                "base_offset": base_offset,
                "last_offset": base_offset + last_delta,
                "count": count,
                "codec": attributes & 0x7,
                "timestamp_type": (attributes >> 3) & 1,
                "transactional": bool(attributes & 0x10),
                "control": bool(attributes & 0x20),
                "first_timestamp": first_ts,
                "max_timestamp": max_ts,
                "producer_id": pid,
                "producer_epoch": pepoch,
                "base_sequence": base_seq,
                "crc_ok": crc == crc32c(data[pos + 21 : end]),
            }
        )
        pos = end
    return out


def _string(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _read_string(buf: bytes, pos: int) -> tuple[str | None, int]:
    (n,) = struct.unpack_from(">h", buf, pos)
    pos += 2
    if n < 0:
        return None, pos
    return buf[pos : pos + n].decode(), pos + n


def produce_v3(
    topic: str, partition: int, batch: bytes, correlation_id: int, acks: int = -1, transactional_id: str | None = None
) -> bytes:
    body = (
        _string(transactional_id)
        + struct.pack(">hi", acks, 30000)
        + struct.pack(">i", 1)
        + _string(topic)
        + struct.pack(">i", 1)
        + struct.pack(">ii", partition, len(batch))
        + batch
    )
    return frame(request_header(PRODUCE, 3, correlation_id) + body)


def parse_produce_v3(payload: bytes) -> tuple[int, int, int]:
    """(correlation_id, error_code, base_offset) of a single-partition Produce v3 response."""
    (corr,) = struct.unpack_from(">i", payload, 0)
    pos = 4 + 4  # topic count
    _, pos = _read_string(payload, pos)
    pos += 4  # partition count
    _partition, err, base_offset = struct.unpack_from(">ihq", payload, pos)
    return corr, err, base_offset


def fetch_v4(
    topic: str, partition: int, offset: int, correlation_id: int, max_bytes: int = 4 << 20, isolation_level: int = 0
) -> bytes:
    body = (
        struct.pack(">iiiib", -1, 100, 1, max_bytes, isolation_level)
        + struct.pack(">i", 1)
        + _string(topic)
        + struct.pack(">i", 1)
        + struct.pack(">iqi", partition, offset, max_bytes)
    )
    return frame(request_header(FETCH, 4, correlation_id) + body)


def parse_fetch_v4(payload: bytes) -> dict:
    """The single partition of a Fetch v4 response: error, high watermark, LSO, aborted txns, records."""
    (corr, _throttle, _ntopics) = struct.unpack_from(">iii", payload, 0)
    pos = 12
    _, pos = _read_string(payload, pos)
    pos += 4  # partition count
    partition, err, hw, lso = struct.unpack_from(">ihqq", payload, pos)
    pos += 22
    (n_aborted,) = struct.unpack_from(">i", payload, pos)
    pos += 4
    aborted = []
    for _ in range(max(n_aborted, 0)):
        aborted.append(struct.unpack_from(">qq", payload, pos))
        pos += 16
    (size,) = struct.unpack_from(">i", payload, pos)
    pos += 4
    records = payload[pos : pos + max(size, 0)]
    return {
        "correlation_id": corr,
        "partition": partition,
        "error_code": err,
        "high_watermark": hw,
        "last_stable_offset": lso,
        "aborted": aborted,
        "records": records,
    }


def init_producer_id_v0(correlation_id: int, transactional_id: str | None = None) -> bytes:
    body = _string(transactional_id) + struct.pack(">i", 60000)
    return frame(request_header(INIT_PRODUCER_ID, 0, correlation_id) + body)


def parse_init_producer_id_v0(payload: bytes) -> tuple[int, int, int, int]:
    """(correlation_id, error_code, producer_id, producer_epoch)."""
    corr, _throttle, err, pid, epoch = struct.unpack_from(">iihqh", payload, 0)
    return corr, err, pid, epoch


def call(sock: socket.socket, request: bytes) -> bytes:
    sock.sendall(request)
    return recv_frame(sock)


def fetch_all_batches(
    bootstrap: str, topic: str, partition: int, start: int = 0, end: int | None = None, isolation_level: int = 0
) -> list[dict]:
    """Batch headers from ``start`` until ``end`` (default: the high watermark) via raw Fetch v4."""
    out: list[dict] = []
    with connect(bootstrap) as s:
        offset, corr = start, 1000
        while True:
            resp = parse_fetch_v4(call(s, fetch_v4(topic, partition, offset, corr, isolation_level=isolation_level)))
            assert resp["error_code"] == 0, f"fetch at {offset}: error {resp['error_code']}"
            stop = resp["high_watermark"] if end is None else end
            if offset >= stop:
                return out
            batches = decode_batch_headers(resp["records"])
            assert batches, f"fetch at {offset} returned no complete batch (HW {resp['high_watermark']})"
            for b in batches:
                if b["last_offset"] >= offset:
                    out.append(b)
            offset = batches[-1]["last_offset"] + 1
            corr += 1


OFFSET_COMMIT = 8


def offset_commit_v2(
    group: str,
    generation: int,
    member: str,
    topic: str,
    partition: int,
    offset: int,
    correlation_id: int,
    metadata: str | None = "",
) -> bytes:
    body = (
        _string(group)
        + struct.pack(">i", generation)
        + _string(member)
        + struct.pack(">q", -1)
        + struct.pack(">i", 1)
        + _string(topic)
        + struct.pack(">i", 1)
        + struct.pack(">iq", partition, offset)
        + _string(metadata)
    )
    return frame(request_header(OFFSET_COMMIT, 2, correlation_id) + body)


def parse_offset_commit_v2(payload: bytes) -> tuple[int, int]:
    """(correlation_id, error_code) of a single-partition OffsetCommit v2 response."""
    (corr,) = struct.unpack_from(">i", payload, 0)
    pos = 8
    _, pos = _read_string(payload, pos)
    pos += 4
    _partition, err = struct.unpack_from(">ih", payload, pos)
    return corr, err


def assert_stored_as_flushed(stored: list[tuple[int, int]], per_flush: int, total: int) -> None:
    """Batches (base offset, count) are stored as sent: contiguous from 0, and none spans two flushes of the
    producer. How a client cuts one flush into batches is its own business: under load librdkafka sends the
    first few records of a flush early (CI saw 12 + 138 for a flush of 150)."""
    assert [base for base, _ in stored] == [0] + list(itertools.accumulate(count for _, count in stored))[:-1]
    assert sum(count for _, count in stored) == total
    assert all(base // per_flush == (base + count - 1) // per_flush for base, count in stored), stored
    assert len(stored) >= -(-total // per_flush)
