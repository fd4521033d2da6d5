"""The `__kdr_prov` header: one entry per hop, and the cycle rule that stops cyclic copies.

An entry is ASCII text `cluster_id,topic,partition,offset,timestamp_ms`: the cluster and
position the record was copied from, and when it was copied. Topic names cannot hold commas and
cluster ids are base64url, so the format is unambiguous and readable in any console consumer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..wire import PROVENANCE_HEADER as HEADER


class ProvenanceError(ValueError):
    """A `__kdr_prov` header that is not ours: refused rather than guessed at."""


@dataclass(frozen=True, slots=True)
class Hop:
    cluster_id: str
    topic: str
    partition: int
    offset: int
    timestamp_ms: int

    def encode(self) -> bytes:
        return hop_prefix(self.cluster_id, self.topic, self.partition) + b"%d,%d" % (self.offset, self.timestamp_ms)

    @classmethod
    def decode(cls, value: bytes | None) -> Hop:
        try:
            cluster_id, topic, partition, offset, ts = (value or b"").decode("ascii").split(",")
            return cls(cluster_id, topic, int(partition), int(offset), int(ts))
        except (UnicodeDecodeError, ValueError):
            raise ProvenanceError(f"malformed {HEADER} header {(value or b'')[:80]!r}") from None


def hop_prefix(cluster_id: str, topic: str, partition: int) -> bytes:
    """The part of an entry shared by every record of a source partition; the copier appends
    `offset,timestamp_ms` per record without building a Hop (the hot path)."""
    return f"{cluster_id},{topic},{partition},".encode()


def hops(headers: list[tuple[str, bytes | None]] | None) -> list[Hop]:
    """The provenance chain of a record, oldest hop first."""
    return [Hop.decode(v) for k, v in headers or () if k == HEADER]


def copied_from(headers: list[tuple[str, bytes | None]] | None, origin: tuple[str, str, int]) -> int | None:
    """The source offset of a record copied by the flow from `origin` (cluster id, topic, partition):
    the offset in its last hop when that hop names `origin`, else None (a local record or another flow's)."""
    last = next((v for k, v in reversed(headers or []) if k == HEADER), None)
    if last is None:
        return None
    hop = Hop.decode(last)
    return hop.offset if (hop.cluster_id, hop.topic, hop.partition) == origin else None


@dataclass(frozen=True)
class ForceCopy:
    """Filter override for failback restores: copy records whose provenance would block them when the
    blocking entry's cluster id and topic match these regexes and the record time is in range."""

    cluster: str = ".*"
    topic: str = ".*"
    from_ms: int | None = None
    to_ms: int | None = None

    def allows(self, hop: Hop, timestamp_ms: int) -> bool:
        return (
            re.fullmatch(self.cluster, hop.cluster_id) is not None
            and re.fullmatch(self.topic, hop.topic) is not None
            and (self.from_ms is None or timestamp_ms >= self.from_ms)
            and (self.to_ms is None or timestamp_ms < self.to_ms)
        )


def blocked(
    chain: list[Hop], dest_cluster_id: str, dest_topic: str, timestamp_ms: int, force: ForceCopy | None = None
) -> bool:
    """The cycle rule: not copied to (C, T) if any entry names (C, T), unless an override forces it."""
    return any(
        hop.cluster_id == dest_cluster_id
        and hop.topic == dest_topic
        and (force is None or not force.allows(hop, timestamp_ms))
        for hop in chain
    )
