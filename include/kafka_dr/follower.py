"""Clients of a client alias that follow it across DR switches: a consumer that delivers each record once, and a
producer that keeps each record until a cluster acknowledged it.

When `dr_failover` or `dr_failback` moves its alias (`client_switch`), `FollowingConsumer` closes, joins its group
in the new cluster, where the DAG has applied the group's translated offsets (a partition the DAG left without one
starts at the translation kept in the cluster's checkpoints, `translated_offsets`), and carries on: no restart of
the application. Those offsets may lie behind what it already delivered: a disaster translates from the last
checkpoint (every 30 s), and a failback's resync copies can land after the group's first unseen local record. So
it remembers, per origin partition, the highest origin offset it delivered, and drops a record it reads again.

A record's origin is where it was first written: the original a `__kdr_republished` header names, else its first
provenance hop, else the record itself (cluster id, topic, partition, offset). Replication keeps each origin
partition in order in every copy, so one number per origin partition is enough. The memory is the process's own:
a restarted application, or a partition a rebalance gives to another member, resumes at the group's committed
offsets, as any consumer does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from .access import ClusterAccess
from .client_switch import SWITCH_CHECK_S, active_cluster, client_config_for
from .replication.provenance import Hop
from .topology import Topology, TopologyError
from .translation.group_offsets import translated_offsets
from .wire import PROVENANCE_HEADER, REPUBLISHED_HEADER

CLUSTER_ID_TIMEOUT_S = 15.0

Origin = tuple[str, str, int]  # cluster id, topic, partition


def origin_of(message: Message, cluster_id: str) -> tuple[Origin, int]:
    """Where `message`, read from the cluster `cluster_id`, was first written: (origin partition, offset). A
    malformed header (not kafka-dr's) makes the record its own origin: delivered, never dropped on a guess."""
    first_hop = None
    try:
        for key, value in message.headers() or ():
            if key == REPUBLISHED_HEADER:
                return _republished_origin(value)
            if key == PROVENANCE_HEADER and first_hop is None:
                first_hop = value
        if first_hop is not None:
            hop = Hop.decode(first_hop)
            return (hop.cluster_id, hop.topic, hop.partition), hop.offset
    except ValueError:
        pass
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    assert topic is not None and partition is not None and offset is not None  # a record, not an error event
    return (cluster_id, topic, partition), offset


def _republished_origin(value: bytes | None) -> tuple[Origin, int]:
    try:
        cluster_id, topic, partition, offset = (value or b"").decode("ascii").split(",")
        return (cluster_id, topic, int(partition)), int(offset)
    except (UnicodeDecodeError, ValueError):
        raise ValueError(f"malformed {REPUBLISHED_HEADER} header {(value or b'')[:80]!r}") from None


class AliasWatch:
    """Where a client alias points, read at most once a SWITCH_CHECK_S (the following clients ask at every call)."""

    def __init__(self, topology: Topology, alias: str) -> None:
        self.topology = topology
        self.alias = alias
        self._checked = float("-inf")

    def moved(self, current: str | None) -> str | None:
        """The alias's active cluster when it is not `current` (None: not yet connected), else None."""
        if time.monotonic() - self._checked < SWITCH_CHECK_S:
            return None
        self._checked = time.monotonic()
        now = active_cluster(self.topology, self.alias)
        return None if now == current else now


class DeliveredOrigins:
    """The highest origin offset delivered per origin partition."""

    def __init__(self) -> None:
        self._highest: dict[Origin, int] = {}

    def first_time(self, origin: Origin, offset: int) -> bool:
        """True, and remembered, when no record of `origin` at or past `offset` was delivered yet."""
        if offset <= self._highest.get(origin, -1):
            return False
        self._highest[origin] = offset
        return True


class FollowingConsumer:
    """confluent-kafka's Consumer for the client alias `alias` of `topology`, subscribed to `topics` (as the alias's
    home cluster names them, `topics_in`) with `config` (group.id and any setting; the alias's cluster gives bootstrap
    and security settings). `poll` returns the next record not delivered before, or None; `dropped` counts the
    records read again and not returned."""

    def __init__(
        self,
        topology: Topology,
        alias: str,
        topics: Iterable[str],
        config: Mapping[str, Any],
        on_move: Callable[[str | None, str], None] | None = None,
        on_assign: Callable[[], None] | None = None,
    ) -> None:
        if "group.id" not in config:
            raise ValueError(f"FollowingConsumer of alias {alias!r}: config needs a group.id")
        self.topology = topology
        self.access = ClusterAccess.from_environ(topology)  # the application's environment, read once
        self.alias = alias
        self.topics = list(topics)
        self.config = dict(config)
        self.on_move = on_move
        self.on_assign = on_assign
        self.cluster: str | None = None
        self.dropped = 0
        self._cluster_id = ""
        self._consumer: Consumer | None = None
        self._delivered = DeliveredOrigins()
        self._watch = AliasWatch(topology, alias)

    def poll(self, timeout: float) -> Message | None:
        """The next record not delivered before (an error event is returned as is), or None."""
        self._follow()
        assert self._consumer is not None
        message = self._consumer.poll(timeout)
        if message is None or message.error() is not None:
            return message
        if self._delivered.first_time(*origin_of(message, self._cluster_id)):
            return message
        self.dropped += 1
        return None

    def commit(self, **kwargs: Any) -> Any:
        """Consumer.commit (asynchronous, offsets...) in the cluster the consumer reads now: without offsets, the
        positions after the records it read there, returned or dropped."""
        assert self._consumer is not None, "commit before the first poll"
        return self._consumer.commit(**kwargs)

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def topics_in(self, cluster: str) -> list[str]:
        """The topics, as named in the alias's home cluster, plus, in another cluster, the names the flows from home
        into it give their copies (a rename: `{source}.{topic}` makes dc1's `orders` `dc1.orders` in dc2)."""
        home = self.topology.client(self.alias).cluster
        renamed = [
            flow.destination_topic(topic)
            for flow in self.topology.flows
            if cluster != home and flow.source == home and flow.target == cluster
            for topic in self.topics
            if flow.copies_data(topic)
        ]
        return list(dict.fromkeys([*self.topics, *renamed]))

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition], moved_in: bool) -> None:
        """In a cluster the alias moved to, a partition the group has no committed offset for (a group the DAG did not
        apply) starts at the group's translation kept in that cluster's checkpoints, not at auto.offset.reset."""
        if moved_in:
            uncommitted = {
                (tp.topic, tp.partition)
                for tp in consumer.committed(partitions, timeout=CLUSTER_ID_TIMEOUT_S)
                if tp.offset < 0
            }
            if uncommitted:
                try:
                    kept = translated_offsets(self.config["group.id"], self.cluster or "", self.access)
                except (TopologyError, KafkaException):
                    kept = None  # no flow into this cluster, or no answer: the consumer's own reset applies
                found = {} if kept is None else {(p.topic, p.partition): p.offset for p in kept.partitions}
                for tp in partitions:
                    if (tp.topic, tp.partition) in uncommitted and (tp.topic, tp.partition) in found:
                        tp.offset = found[(tp.topic, tp.partition)]
                consumer.assign(partitions)
        if self.on_assign is not None:
            self.on_assign()

    def _follow(self) -> None:
        """Connect to the alias's active cluster when it moved (or on first use)."""
        now = self._watch.moved(self.cluster)
        if now is None:
            return
        if self._consumer is not None:
            # The old cluster may be gone: leaving its group could wait out the session timeout.
            threading.Thread(target=self._consumer.close, daemon=True).start()
        consumer = Consumer({**client_config_for(self.alias, self.topology), **self.config})
        try:
            cluster_id = consumer.list_topics(timeout=CLUSTER_ID_TIMEOUT_S).cluster_id
        except KafkaException as e:
            consumer.close()
            raise RuntimeError(f"alias {self.alias!r}: cluster {now} did not answer: {e}") from None
        moved_in = self.cluster is not None
        consumer.subscribe(self.topics_in(now), on_assign=lambda c, partitions: self._assigned(c, partitions, moved_in))
        before, self.cluster, self._cluster_id, self._consumer = self.cluster, now, cluster_id, consumer
        if self.on_move is not None:
            self.on_move(before, now)


OLD_CLUSTER_FLUSH_S = 3.0  # how long a switch waits for the old cluster to acknowledge what is in flight
_RESEND = {KafkaError._MSG_TIMED_OUT, KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT}


class FollowingProducer:
    """confluent-kafka's Producer for the client alias `alias` of `topology`, with `config` (any setting; the alias's
    cluster gives bootstrap and security settings; idempotence is on unless `config` says otherwise). When
    `dr_failover` or `dr_failback` moves the alias, it gives the old cluster OLD_CLUSTER_FLUSH_S to acknowledge what
    is in flight, then produces what it did not acknowledge to the new cluster, before any later record. A record
    no cluster acknowledged (timed out, purged at a switch) is produced again on the active cluster, so each one is
    acknowledged at least once: a failed cluster that wrote a record without acknowledging it, and replicated it,
    holds it twice. `on_delivery` is called once per record, with its acknowledgement or with an error no retry can
    mend (a record too large, a topic refused)."""

    def __init__(
        self,
        topology: Topology,
        alias: str,
        config: Mapping[str, Any] | None = None,
        on_move: Callable[[str | None, str], None] | None = None,
    ) -> None:
        self.topology = topology
        self.alias = alias
        self.config = {"enable.idempotence": True, **(config or {})}
        self.on_move = on_move
        self.cluster: str | None = None
        self.resent = 0  # records produced again after their first cluster did not acknowledge them
        self._producer: Producer | None = None
        self._unacknowledged: list[tuple[dict[str, Any], Callable[..., None] | None]] = []
        self._lock = threading.Lock()
        self._watch = AliasWatch(topology, alias)

    def produce(self, topic: str, value: Any = None, key: Any = None, **kwargs: Any) -> None:
        """Producer.produce (partition, headers, timestamp, on_delivery...), to the alias's active cluster."""
        self._follow()
        callback = kwargs.pop("on_delivery", None) or kwargs.pop("callback", None)
        self._send({"topic": topic, "value": value, "key": key, **kwargs}, callback)

    def poll(self, timeout: float = 0.0) -> int:
        """Serve delivery reports; follows the alias and produces again what was not acknowledged."""
        self._follow()
        self._resend()
        assert self._producer is not None
        return self._producer.poll(timeout)

    def flush(self, timeout: float = 30.0) -> int:
        """Wait until everything produced is acknowledged (or `timeout`); returns the records still waiting."""
        deadline = time.monotonic() + timeout
        while True:
            self.poll(0)
            assert self._producer is not None
            left = self._producer.flush(max(min(deadline - time.monotonic(), SWITCH_CHECK_S), 0))
            with self._lock:
                left += len(self._unacknowledged)
            if left == 0 or time.monotonic() >= deadline:
                return left

    def _send(self, record: dict[str, Any], callback: Callable[..., None] | None) -> None:
        assert self._producer is not None

        def delivered(err: KafkaError | None, message: Message) -> None:
            if err is not None and (err.code() in _RESEND or err.retriable()):
                with self._lock:
                    self._unacknowledged.append((record, callback))
            elif callback is not None:
                callback(err, message)

        while True:
            try:
                self._producer.produce(**record, on_delivery=delivered)
                return
            except BufferError:  # the local queue is full: serve reports, then try again
                self._producer.poll(0.05)

    def _resend(self) -> None:
        with self._lock:
            again, self._unacknowledged = self._unacknowledged, []
        self.resent += len(again)
        for record, callback in again:
            self._send(record, callback)

    def _follow(self) -> None:
        """Connect to the alias's active cluster when it moved (or on first use)."""
        now = self._watch.moved(self.cluster)
        if now is None:
            return
        old = self._producer
        self._producer = Producer({**client_config_for(self.alias, self.topology), **self.config})
        before, self.cluster = self.cluster, now
        if old is not None:
            # A live old cluster acknowledges what is in flight; the rest is purged and comes back through the
            # delivery reports, then goes to the new cluster.
            old.flush(OLD_CLUSTER_FLUSH_S)
            old.purge()
            old.poll(0)
            self._resend()
        if self.on_move is not None:
            self.on_move(before, now)
