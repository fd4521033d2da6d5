"""Heartbeats: a record produced into the source's `_kdr.heartbeats` that the flow copies into the target's,
so the end-to-end latency of a flow can be measured even when no data is flowing (MirrorMaker 2 does the
same with its heartbeats topic).

Record: key = flow name (utf-8), value JSON {"flow", "id", "created_ms"}, timestamp = created_ms.
A continuous replicator sends them with a `HeartbeatTask` (MirrorMaker 2's heartbeat task).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from ..clients import error_text, offsets_of
from .internal import HEARTBEATS, ensure_internal_topics
from .provenance import ProvenanceError, hops

log = logging.getLogger(__name__)

WINDOW = 1_000
"""Records read back from the end of each heartbeat partition when waiting starts: the copy may already
be there, and older records cannot be ours."""


class HeartbeatError(RuntimeError):
    """A heartbeat could not be sent; the message is one line naming the cluster and why."""


@dataclass(frozen=True)
class Heartbeat:
    flow: str
    id: str
    created_ms: int

    def encode(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()


def parse_heartbeat(value: bytes | None) -> Heartbeat:
    """Decode a heartbeat record value; anything else raises ValueError naming what is wrong."""
    try:
        data = json.loads(value or b"")
        flow, heartbeat_id, created_ms = data["flow"], data["id"], data["created_ms"]
    except (ValueError, TypeError, KeyError):
        raise ValueError(f"not a heartbeat record value: {(value or b'')[:80]!r}") from None
    if not (isinstance(flow, str) and isinstance(heartbeat_id, str) and type(created_ms) is int):
        raise ValueError(f"not a heartbeat record value (wrong field types): {(value or b'')[:80]!r}")
    return Heartbeat(flow, heartbeat_id, created_ms)


class HeartbeatSender:
    """Produces heartbeats of one flow into the source cluster with one long-lived producer, creating
    `_kdr.heartbeats` there if missing.

    Not idempotent on purpose: a new idempotent producer waits about half a second for its producer id,
    which would count as replication latency; a heartbeat duplicated by a retry is harmless."""

    def __init__(self, source_config: dict[str, Any], flow: str, timeout: float = 10.0) -> None:
        self.flow, self.timeout = flow, timeout
        self.where = f"cluster {source_config.get('bootstrap.servers')}"
        try:
            ensure_internal_topics(AdminClient(source_config), (HEARTBEATS,), timeout=timeout)
        except KafkaException as exc:
            raise HeartbeatError(f"cannot create {HEARTBEATS} on {self.where}: {error_text(exc)}") from None
        self.producer = Producer(
            {**source_config, "acks": "all", "linger.ms": 0, "message.timeout.ms": int(timeout * 1000)}
        )
        self.last_written: tuple[int, int] | None = None  # (partition, offset) of the last heartbeat acknowledged

    def send(self) -> Heartbeat:
        heartbeat = Heartbeat(flow=self.flow, id=uuid.uuid4().hex, created_ms=int(time.time() * 1000))
        errors: list[KafkaError] = []
        written: list[tuple[int, int]] = []

        def delivered(err: KafkaError | None, msg: Any) -> None:
            if err is None:
                written.append((msg.partition(), msg.offset()))
            else:
                errors.append(err)

        self.producer.produce(
            HEARTBEATS,
            key=self.flow.encode(),
            value=heartbeat.encode(),
            timestamp=heartbeat.created_ms,
            on_delivery=delivered,
        )
        if self.producer.flush(self.timeout) or errors:
            reason = errors[0].str() if errors else f"not acknowledged within {self.timeout:g} s"
            raise HeartbeatError(f"heartbeat of flow {self.flow} not written to {HEARTBEATS} on {self.where}: {reason}")
        self.last_written = written[0]
        return heartbeat


class HeartbeatTask:
    """A heartbeat of `flow` into its source every `interval` seconds until `stop` is set, on a daemon thread beside
    the copies. An outage is logged and the next heartbeat tried again, never raised: replication goes on, and the
    lag sensor sees the missing heartbeats."""

    def __init__(
        self,
        source_config: dict[str, Any],
        flow: str,
        interval: float,
        stop: threading.Event,
        sender: Callable[[dict[str, Any], str], HeartbeatSender] = HeartbeatSender,
    ) -> None:
        self.source_config, self.flow, self.interval, self.stop = source_config, flow, interval, stop
        self.make_sender = sender
        self.sender: HeartbeatSender | None = None
        self.thread = threading.Thread(target=self.run, name="kdr-heartbeats", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def run(self) -> None:
        while True:
            try:
                self.sender = self.sender or self.make_sender(self.source_config, self.flow)
                self.sender.send()
            except Exception as exc:  # noqa: BLE001 - an outage must not stop replication; the lag sensor sees it
                log.warning("heartbeat not sent: %s", exc)
            if self.stop.wait(self.interval):
                return

    def uncopied(self, copied_to: Mapping[tuple[str, int], int], timeout: float = 15.0) -> dict[tuple[str, int], int]:
        """Once `stop` is set: {(heartbeat topic, partition): the offset after the last heartbeat this task wrote}
        when that heartbeat is at or past `copied_to` (the next source offset to copy, per topic and partition)
        of a flow that copies heartbeats, else {}. A heartbeat written as the last epoch ended would otherwise stay
        behind in the source after a clean stop. Waits for a send under way first: no heartbeat follows."""
        self.thread.join(timeout)
        last = None if self.sender is None else self.sender.last_written
        if last is None:
            return {}
        partition, offset = (HEARTBEATS, last[0]), last[1]
        if partition not in copied_to or copied_to[partition] > offset:  # not copied by this flow, or copied
            return {}
        return {partition: offset + 1}


def send_heartbeat(source_config: dict[str, Any], flow: str, timeout: float = 10.0) -> Heartbeat:
    """Produce one heartbeat for `flow` into the source cluster."""
    return HeartbeatSender(source_config, flow, timeout).send()


def wait_for_heartbeat(target_config: dict[str, Any], heartbeat: Heartbeat, timeout: float) -> float:
    """Wait until `heartbeat` was copied into the target; returns the end-to-end latency in seconds (from its
    creation to the copy's provenance time, or to when it was seen if the flow writes no provenance)."""
    where = f"cluster {target_config.get('bootstrap.servers')}"
    deadline = time.monotonic() + timeout
    admin = AdminClient(target_config)
    consumer = Consumer(
        {
            **target_config,
            "group.id": f"_kdr.heartbeat.{heartbeat.flow}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    assigned: set[int] = set()
    next_lookup = 0.0
    try:
        while time.monotonic() < deadline:
            if time.monotonic() >= next_lookup:  # the topic may appear, or grow, while we wait
                new = _unread_partitions(admin, assigned, deadline)
                if new:
                    consumer.incremental_assign(new)
                    assigned.update(tp.partition for tp in new)
                next_lookup = time.monotonic() + 1.0
            for msg in consumer.consume(100, timeout=0.2) if assigned else ():
                if msg.error() is not None:
                    if msg.error().fatal():
                        raise HeartbeatError(f"reading {HEARTBEATS} on {where}: {msg.error().str()}")
                    continue
                latency = _latency_if_ours(msg.value(), msg.headers(), heartbeat)
                if latency is not None:
                    return latency
            if not assigned:
                time.sleep(0.2)  # the flow has not created the target's heartbeat topic yet
    finally:
        consumer.close()
    raise TimeoutError(
        f"heartbeat {heartbeat.id} of flow {heartbeat.flow} did not reach {HEARTBEATS} on {where} "
        f"within {timeout:g} s (is the replicator running?)"
    )


def _latency_if_ours(
    value: bytes | None, headers: list[tuple[str, bytes | None]] | None, heartbeat: Heartbeat
) -> float | None:
    try:
        if parse_heartbeat(value).id != heartbeat.id:
            return None
        chain = hops(headers)
    except (ValueError, ProvenanceError):
        return None  # some other writer's record: not ours
    arrived_ms = chain[-1].timestamp_ms if chain else int(time.time() * 1000)
    return max(0.0, (arrived_ms - heartbeat.created_ms) / 1000)


def _unread_partitions(admin: AdminClient, assigned: set[int], deadline: float) -> list[TopicPartition]:
    """Heartbeat partitions of the target not yet read, each positioned `WINDOW` records before its end so a
    copy made before we started waiting is seen; empty while the topic does not exist or does not answer."""
    timeout = max(0.5, deadline - time.monotonic())
    try:
        meta = admin.list_topics(timeout=timeout).topics.get(HEARTBEATS)
        if meta is None or meta.error is not None:
            return []
        tps = [TopicPartition(HEARTBEATS, p) for p in sorted(set(meta.partitions) - assigned)]
        if not tps:
            return []
        keys = [(tp.topic, tp.partition) for tp in tps]
        ends = offsets_of(admin, keys, OffsetSpec.latest(), timeout=timeout)
        starts = offsets_of(admin, keys, OffsetSpec.earliest(), timeout=timeout)
        return [TopicPartition(HEARTBEATS, p, max(starts[(t, p)], ends[(t, p)] - WINDOW)) for t, p in keys]
    except KafkaException:
        return []  # not answering for now: the caller's deadline decides
