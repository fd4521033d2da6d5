"""Leader election through the kafkastore cluster, by heartbeats.

Real Confluent registries elect through a Kafka consumer group. This one needs only Produce,
Fetch, ListOffsets, Metadata and CreateTopics: every instance appends a heartbeat
``{url, eligible, instance_id, started_at, ts}`` to the ``_schemas_leader`` topic every second
and reads everyone's heartbeats back. The leader is the leader-eligible instance with a
heartbeat younger than ``HEARTBEAT_TTL_S`` that started first (ties: lowest url). Every
instance computes the same answer from the same log, and a running leader is never replaced by
an instance that starts later, so leadership only moves when the leader stops beating.

An instance counts itself only once it has read its own first heartbeat back, which proves it
has also read every heartbeat appended before it: a newcomer cannot claim leadership before it
knows of the incumbent. Freshness compares the sender's clock to the reader's, so instances
need clocks synchronized well within the TTL (they share a host locally; NTP in production).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from .store import POLL_S, client_config, ensure_topic

log = logging.getLogger(__name__)

HEARTBEAT_TOPIC = "_schemas_leader"
# Only the last seconds of heartbeats matter: an hour of them is kept, whether or not compacted.
HEARTBEAT_TOPIC_CONFIG = {"cleanup.policy": "delete", "retention.ms": "3600000"}
HEARTBEAT_INTERVAL_S = 1.0
HEARTBEAT_TTL_S = 5.0
RESIGN_CHECK_S = 0.2  # a store that acknowledges no beat within this is not waited for at the stop
_REPLAY_RECORDS = 500  # recent heartbeats to read at startup: > TTL worth for up to 100 instances


@dataclass(frozen=True)
class Member:
    """One instance, as its latest heartbeat describes it."""

    url: str
    eligible: bool
    instance_id: str
    started_at: float
    ts: float


def elect(members: Iterable[Member], now: float, ttl: float = HEARTBEAT_TTL_S) -> Member | None:
    """The leader among ``members``: the earliest-started live eligible one, or None."""
    live = [m for m in members if m.eligible and now - m.ts <= ttl]
    return min(live, key=lambda m: (m.started_at, m.url), default=None)


class LeaderElector:
    """Beats for this instance and tracks everyone's beats on the kafkastore cluster."""

    def __init__(self, bootstrap: str, url: str, eligible: bool) -> None:
        self.bootstrap = bootstrap
        self.me = Member(url, eligible, uuid.uuid4().hex, time.time(), 0.0)
        self._members: dict[str, Member] = {}
        self._seen_self = False
        self._announced: str | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def leader(self) -> Member | None:
        with self._lock:
            members = [m for m in self._members.values() if self._seen_self or m.instance_id != self.me.instance_id]
        return elect(members, time.time())

    def members(self) -> list[Member]:
        with self._lock:
            return sorted(self._members.values(), key=lambda m: m.url)

    def is_leader(self) -> bool:
        leader = self.leader()
        return leader is not None and leader.instance_id == self.me.instance_id

    def _run(self) -> None:
        admin = AdminClient(client_config(self.bootstrap))
        while not self._stop.is_set():
            try:
                ensure_topic(admin, HEARTBEAT_TOPIC, HEARTBEAT_TOPIC_CONFIG)
                break
            except KafkaException:
                self._stop.wait(2.0)  # the store logs unreachability; just retry
        if self._stop.is_set():
            return
        producer = Producer(
            {
                **client_config(self.bootstrap),
                "acks": "all",
                "linger.ms": 0,
                "message.timeout.ms": int(HEARTBEAT_TTL_S * 1000),  # a late heartbeat is worthless
            }
        )
        consumer = Consumer(
            {
                **client_config(self.bootstrap),
                "group.id": f"kdr-schema-registry-election-{self.me.instance_id}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 5000,
            }
        )
        try:
            self._assign_recent(consumer)
            while not self._stop.is_set():
                self._beat(producer)
                self._announce()
                deadline = time.monotonic() + HEARTBEAT_INTERVAL_S
                while (remaining := deadline - time.monotonic()) > 0 and not self._stop.is_set():
                    message = consumer.poll(min(remaining, POLL_S))
                    if message is not None and message.error() is None:
                        self._record(message.value())
        finally:
            consumer.close()
            # Resign, so that the others elect a successor without waiting the TTL; but only wait for it while
            # the store answers (its last beat acknowledged within RESIGN_CHECK_S): on a lost store the wait
            # would only delay the stop, e.g. the schema redirect's restart in a disaster.
            answering = producer.flush(RESIGN_CHECK_S) == 0
            self._beat(producer, ts=0.0)
            producer.flush(1 if answering else 0)

    def _assign_recent(self, consumer: Consumer) -> None:
        """Start reading near the end: only heartbeats younger than the TTL matter."""
        while not self._stop.is_set():
            try:
                low, high = consumer.get_watermark_offsets(TopicPartition(HEARTBEAT_TOPIC, 0), timeout=5)
                consumer.assign([TopicPartition(HEARTBEAT_TOPIC, 0, max(low, high - _REPLAY_RECORDS))])
                return
            except KafkaException as exc:
                log.debug("heartbeat topic offsets unavailable: %s", exc)
                self._stop.wait(1.0)

    def _beat(self, producer: Producer, ts: float | None = None) -> None:
        beat = asdict(self.me) | {"ts": time.time() if ts is None else ts}
        try:
            producer.produce(HEARTBEAT_TOPIC, key=self.me.url.encode(), value=json.dumps(beat).encode(), partition=0)
            producer.poll(0)
        except (BufferError, KafkaException) as exc:
            log.debug("heartbeat not sent: %s", exc)

    def _record(self, value: bytes | None) -> None:
        try:
            member = Member(**json.loads(value or b""))
        except (ValueError, TypeError) as exc:
            log.warning("ignoring malformed heartbeat %r: %s", value, exc)
            return
        with self._lock:
            self._members[member.url] = member
            if member.instance_id == self.me.instance_id:
                self._seen_self = True

    def _announce(self) -> None:
        """Log each change of leader once, as Confluent logs its election results."""
        leader = self.leader()
        url = leader.url if leader else None
        if url != self._announced:
            self._announced = url
            log.info("schema registry leader is now %s%s", url or "unknown", " (this instance)" * self.is_leader())
