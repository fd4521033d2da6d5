"""The driver's clients of one flow, and how a call to a cluster is retried before it fails in one line.

`FlowClients` is a context manager: constructing it only reads the clusters' settings; entering connects (the
clusters' ids, a read_committed reader of the target); leaving closes. What the flow's target must hold before a
round syncs topics (the internal topics, the flow's state) is the copy rounds' explicit step (rounds.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from ..access import ClusterAccess
from ..clients import error_text, offsets_of
from ..topology import Cluster, Flow

log = logging.getLogger(__name__)


class UnreachableError(RuntimeError):
    """A cluster did not answer after every retry."""


def with_retries(what: str, call: Callable[[], Any], attempts: int = 5, first_delay: float = 1.0) -> Any:
    """Retry a cluster call with exponential back-off; then fail with one line naming `what`."""
    delay = first_delay
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except (KafkaException, TimeoutError) as exc:
            if attempt == attempts:
                tries = f"{attempts} attempt" + ("s" if attempts > 1 else "")
                raise UnreachableError(f"{what} unreachable after {tries}: {error_text(exc)}") from None
            log.warning("%s not answering (%s); retry %d/%d in %.0fs", what, error_text(exc), attempt, attempts, delay)
            time.sleep(delay)
            delay *= 2


class FlowClients:
    """Clients and identities of one flow, opened on the driver: `with FlowClients(...) as clients`, or `open()`
    and `close()` where the opening and the closing lie apart (a replicator's start and stop)."""

    source_admin: AdminClient
    target_admin: AdminClient
    source_cluster_id: str
    target_cluster_id: str

    def __init__(self, access: ClusterAccess, flow: Flow, retries: int = 5) -> None:
        self.flow = flow
        self.retries = retries
        self.source = access.topology.cluster(flow.source)
        self.target = access.topology.cluster(flow.target)
        self.source_config = access.config(flow.source)
        self.target_config = access.config(flow.target)
        self.reader: Consumer | None = None  # the target, read_committed: where the flow's copies stand

    def open(self) -> FlowClients:
        """Connect: both clusters must answer (their ids name the copies' provenance), within the retries."""
        self.source_admin = AdminClient(self.source_config)
        self.target_admin = AdminClient(self.target_config)
        self.source_cluster_id = self._cluster_id("source", self.source, self.source_admin)
        self.target_cluster_id = self._cluster_id("target", self.target, self.target_admin)
        # Short fetch waits: the reader reads to known ends, and a broker answers a connection's requests in
        # order, so a long-polling fetch would hold up the offset lookups behind it.
        self.reader = Consumer(
            {
                **self.target_config,
                "group.id": f"{self.flow.name}-resume",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 10,
            }
        )
        return self

    def close(self) -> None:
        reader, self.reader = self.reader, None
        if reader is not None:
            reader.close()

    def __enter__(self) -> FlowClients:
        return self.open()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def _cluster_id(self, side: str, cluster: Cluster, admin: AdminClient) -> str:
        return with_retries(
            f"{side} cluster {cluster.name} ({cluster.bootstrap_servers})",
            lambda: admin.describe_cluster(request_timeout=10).result().cluster_id,
            self.retries,
        )

    def source_partitions(self) -> dict[str, int]:
        """Source topics the flow copies, with partition counts (heartbeats included)."""
        topics = self.source_admin.list_topics(timeout=10).topics
        return {name: len(meta.partitions) for name, meta in topics.items() if self.flow.copies(name)}

    def dest_topic(self, topic: str) -> str:
        return self.flow.destination_topic(topic)

    def existing(self, partitions: list[tuple[str, int]]) -> list[tuple[str, int]]:
        """Those of the target's `partitions` that exist."""
        topics = self.target_admin.list_topics(timeout=10).topics
        return [(t, p) for t, p in partitions if t in topics and p in topics[t].partitions]

    def offsets(self, partitions: list[TopicPartition], spec: OffsetSpec) -> dict[tuple[str, int], int]:
        """The source's read_committed offsets of `partitions` by `spec`."""
        keys = [(tp.topic, tp.partition) for tp in partitions]
        return offsets_of(self.source_admin, keys, spec, IsolationLevel.READ_COMMITTED, 15)
