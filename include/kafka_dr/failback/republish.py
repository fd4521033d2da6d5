"""What a failback does with the records that never left the restored cluster (dr_failback's `unreplicated`).

`republish`: each is produced again at the end of its partition in the restored cluster, where the groups moved
back will read next, with key, value, headers and timestamp kept and a `__kdr_republished` header naming the
original (cluster id, topic, partition, offset). Each partition's copies and a marker in the restored cluster's
`_kdr.progress` go in one transaction, so a retried run republishes nothing twice.

`skip_originals` (after republish, or for `discard`): a progress record of the flow in the serving cluster's
`_kdr.progress` whose next offset is past the last original, so the flow, once resumed, copies neither the originals
(republished, or left unread by choice) nor anything before them again. Nothing is deleted anywhere.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import IsolationLevel, Message, Producer
from confluent_kafka.admin import AdminClient

from ..access import ClusterAccess
from ..clients import end_offsets, init_transactions, read_committed
from ..replication.internal import PROGRESS, ensure_internal_topics, partition_key, put_records, read_records
from ..replication.resume import Progress
from ..reports import Step
from ..wire import REPUBLISHED_HEADER
from .plan import FailbackPlan
from .unreplicated import Measured, Unreplicated, UnreplicatedRange

log = logging.getLogger(__name__)

READ_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Handled:
    """What the failback did with the records that never left: its `action` over `records` of them, how many it
    `republished` now and where it moved each flow out past them ({"flow topic[partition]": next offset}); the last
    two None when there was nothing to handle. `step`: when its task ran."""

    action: str
    records: int
    republished: int | None = None
    flows_moved: dict[str, int] | None = None
    step: Step | None = None


def handle(access: ClusterAccess, plan: FailbackPlan, measured: Measured) -> Handled:
    """What the plan's action does with the records that never left (`measured`): republish them, or leave them
    unread (discard); either way the flows out move past the originals."""
    if not measured.ranges:
        return Handled(plan.unreplicated, 0)
    found = Unreplicated(plan.restored, plan.serving, measured.flows or (), measured.ranges, ())
    republished = republish(access, found) if plan.unreplicated == "republish" else 0
    return Handled(plan.unreplicated, found.records, republished, skip_originals(access, found))


def republish(access: ClusterAccess, found: Unreplicated) -> int:
    """Produce every unreplicated record again in the restored cluster (see the module); returns how many were
    produced now (0 when an earlier run already did it all)."""
    config = access.config(found.restored)
    admin = AdminClient(config)
    ensure_internal_topics(admin, (PROGRESS,))
    cluster_id = admin.describe_cluster(request_timeout=10).result().cluster_id
    done = _republished(config)
    produced = 0
    for (flow, topic, partition), ranges in _by_partition(found.ranges).items():
        last = max(r.to_offset for r in ranges)
        through = done.get(_marker_key(flow, topic, partition), -1)  # an earlier run committed these
        if through >= last:
            continue
        producer = Producer({**config, "transactional.id": f"_kdr.failback.{flow}.{topic}.{partition}"})
        init_transactions(producer)
        producer.begin_transaction()
        count = 0
        for r in ranges:
            for message in read_committed(
                config, {(topic, partition): (max(r.from_offset, through + 1), r.to_offset + 1)}, READ_TIMEOUT_S
            ):
                if any(key == REPUBLISHED_HEADER for key, _ in message.headers() or []):
                    continue  # a republished record not copied yet: republished once is enough
                origin = f"{cluster_id},{topic},{partition},{message.offset()}".encode()
                _produce(producer, topic, partition, message, origin)
                count += 1
        producer.produce(PROGRESS, key=_marker_key(flow, topic, partition), value=json.dumps({"through": last}))
        producer.commit_transaction(60)
        log.info(
            "republished %d records of %s[%d] in %s, originals up to %d", count, topic, partition, found.restored, last
        )
        produced += count
    return produced


def skip_originals(access: ClusterAccess, found: Unreplicated) -> dict[str, int]:
    """Move each flow past the last original of each partition (see the module); returns the new next offsets by
    "flow topic[partition]"."""
    moved: dict[str, int] = {}
    topology = access.topology
    restored = access.admin(found.restored)
    source_cluster = restored.describe_cluster(request_timeout=10).result().cluster_id
    for flow_name in found.flows:
        flow = topology.flow(flow_name)
        ranges = _by_partition(r for r in found.ranges if r.flow == flow_name)
        if not ranges:
            continue
        serving = access.config(flow.target)
        dests = {(flow.destination_topic(topic), partition) for _, topic, partition in ranges}
        dest_ends = end_offsets(AdminClient(serving), sorted(dests), IsolationLevel.READ_COMMITTED)
        records = []
        for (_, topic, partition), partition_ranges in ranges.items():
            after = max(r.to_offset for r in partition_ranges) + 1
            dest = flow.destination_topic(topic)
            progress = Progress(after, dest, dest_ends[(dest, partition)], source_cluster)
            records.append((partition_key(flow.name, topic, partition), progress.to_dict()))
            moved[f"{flow.name} {topic}[{partition}]"] = after
        put_records(serving, PROGRESS, records)
    return moved


def _produce(producer: Producer, topic: str, partition: int, message: Message, origin: bytes) -> None:
    while True:
        try:
            producer.produce(
                topic,
                key=message.key(),
                value=message.value(),
                headers=[*(message.headers() or []), (REPUBLISHED_HEADER, origin)],
                partition=partition,
                timestamp=message.timestamp()[1],
            )
            return
        except BufferError:
            producer.poll(0.05)


def _by_partition(ranges: Iterable[UnreplicatedRange]) -> dict[tuple[str, str, int], list[UnreplicatedRange]]:
    grouped: dict[tuple[str, str, int], list[UnreplicatedRange]] = {}
    for r in ranges:
        grouped.setdefault((r.flow, r.topic, r.partition), []).append(r)
    return grouped


def _marker_key(flow: str, topic: str, partition: int) -> bytes:
    return f"failback/{flow}/{topic}/{partition}/republished".encode()


def _republished(config: dict[str, Any]) -> dict[bytes, int]:
    """The markers earlier runs committed: through which original offset each partition was republished."""
    done: dict[bytes, int] = {}
    for message in read_records(config, PROGRESS):
        key = message.key() or b""
        if key.startswith(b"failback/") and message.value() is not None:
            done[key] = json.loads(message.value())["through"]
    return done
