"""A consumer of a client alias that follows it across DR switches and delivers each record once.

When `dr_failover` or `dr_failback` moves its alias (`client_switch`), `FollowingConsumer` closes, joins its group
in the new cluster, where the DAG has applied the group's translated offsets, and carries on: no restart of the
application. Those offsets may lie behind what it already delivered: a disaster translates from the last
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

from confluent_kafka import Consumer, KafkaException, Message

from .client_switch import active_cluster, client_config_for
from .failback.republish import REPUBLISHED_HEADER
from .replication.provenance import HEADER as PROVENANCE_HEADER
from .replication.provenance import Hop
from .topology import Topology

SWITCH_CHECK_S = 1.0  # how often the alias's active cluster is read
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
    """confluent-kafka's Consumer for the client alias `alias` of `topology`, subscribed to `topics` with `config`
    (group.id and any setting; the alias's cluster gives bootstrap and security settings). `poll` returns the next
    record not delivered before, or None; `dropped` counts the records read again and not returned."""

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
        self._checked = float("-inf")

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

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def _follow(self) -> None:
        """Connect to the alias's active cluster when it moved (or on first use), at most once a SWITCH_CHECK_S."""
        if time.monotonic() - self._checked < SWITCH_CHECK_S:
            return
        self._checked = time.monotonic()
        now = active_cluster(self.topology, self.alias)
        if now == self.cluster:
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
        consumer.subscribe(self.topics, on_assign=lambda *_: self.on_assign and self.on_assign())
        before, self.cluster, self._cluster_id, self._consumer = self.cluster, now, cluster_id, consumer
        if self.on_move is not None:
            self.on_move(before, now)
