"""Records that never left a restored cluster: the exact RPO of the disaster a failback follows.

A disaster failover can only estimate its loss (the flow's last lag snapshot). Once the failed cluster is back with
its data the loss is exact: for each flow out of it into the serving cluster, each source partition's read_committed
end now against the next offset the flow would copy, which the copies in the serving cluster say (the destination
log is the truth: replication.resume; the group the replicator commits on the source may be behind it). In between,
the data records that flow would copy are unreplicated; those it would not (copies that came from the serving
cluster: the cycle rule) are not. Records the restored cluster's retention deleted before they were copied are
counted apart: gone, so neither republishable nor readable. Reads only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from confluent_kafka import KafkaException, Message

from ..access import ClusterAccess
from ..clients import error_text, read_committed
from ..replication.flow_clients import FlowClients, UnreachableError
from ..replication.provenance import ProvenanceError, blocked, hops
from ..replication.rounds import CopyRounds, Lost
from ..reports import Step
from ..topology import is_data_topic
from .plan import FailbackPlan

log = logging.getLogger(__name__)

READ_TIMEOUT_S = 300.0  # reading every unreplicated record of a flow, which a long outage can make many


class MeasureError(RuntimeError):
    """The restored or the serving cluster did not answer; one line naming it."""


@dataclass(frozen=True)
class UnreplicatedRange:
    """A run of records of one source partition that never reached the serving cluster (offsets inclusive)."""

    flow: str
    topic: str
    partition: int
    from_offset: int
    to_offset: int
    records: int  # data records in the run: transaction markers and aborted records between them are not counted


@dataclass(frozen=True)
class Unreplicated:
    """What never left `restored` for `serving`, per flow out of it."""

    restored: str
    serving: str
    flows: tuple[str, ...]
    ranges: tuple[UnreplicatedRange, ...]
    deleted: tuple[Lost, ...]  # deleted by the restored cluster's retention before they were copied

    @property
    def records(self) -> int:
        return sum(r.records for r in self.ranges)

    @property
    def per_topic(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self.ranges:
            counts[r.topic] = counts.get(r.topic, 0) + r.records
        return dict(sorted(counts.items()))

    def measured(self) -> Measured:
        """The report's `unreplicated` fields (docs/design.md) plus the flows measured and what retention deleted."""
        return Measured(
            records=self.records,
            per_topic=self.per_topic,
            ranges=self.ranges,
            flows=self.flows,
            deleted_before_copied=tuple(
                DeletedRange(d.topic, d.partition, d.from_offset, d.to_offset - 1) for d in self.deleted
            ),
        )


@dataclass(frozen=True)
class DeletedRange:
    """Offsets (inclusive) of a partition that the restored cluster's retention deleted before they were copied."""

    topic: str
    partition: int
    from_offset: int
    to_offset: int


@dataclass(frozen=True)
class Measured:
    """The measure step's result, the report's `unreplicated` fields: the records that never left and their count
    per topic (None, with a `note`, when the restored cluster lost its data), their ranges, the flows measured and
    what retention deleted before it was copied. `step`: when the measure task ran."""

    records: int | None
    per_topic: dict[str, int]
    ranges: tuple[UnreplicatedRange, ...]
    flows: tuple[str, ...] | None = None
    deleted_before_copied: tuple[DeletedRange, ...] | None = None
    note: str | None = None
    step: Step | None = None


def unreplicated_of(access: ClusterAccess, plan: FailbackPlan) -> Measured:
    """What never left the restored cluster: measured when it kept its data; when it lost it, what never left it is
    gone with it, and the failover report's estimate stands. Raises MeasureError."""
    if plan.mode == "data_lost":
        note = f"{plan.restored} lost its data: what never left it is gone, the failover report's estimate stands"
        return Measured(records=None, per_topic={}, ranges=(), note=note)
    return measure(access, plan.restored, plan.serving).measured()


def measure(access: ClusterAccess, restored: str, serving: str, timeout: float = READ_TIMEOUT_S) -> Unreplicated:
    """What never left `restored` for `serving`, over every flow of the topology from one into the other."""
    flows = [f for f in access.topology.flows if f.source == restored and f.target == serving]
    ranges: list[UnreplicatedRange] = []
    deleted: list[Lost] = []
    for flow in flows:
        try:
            context = FlowClients(access, flow, retries=1).open()
        except UnreachableError as exc:
            raise MeasureError(f"flow {flow.name}: {exc}") from None
        try:
            copy_round = CopyRounds(context).next(sync=False)
            tasks = [t for t in copy_round.tasks if is_data_topic(t.topic)]
            pending = {(t.topic, t.partition): (t.start, t.end) for t in tasks if t.end > t.start}
            log.info("flow %s: reading %d records not yet copied", flow.name, sum(e - s for s, e in pending.values()))
            records = read_committed(context.source_config, pending, timeout)
            ranges += unreplicated_ranges(
                records, flow.name, context.target_cluster_id, {t.topic: t.dest_topic for t in tasks}
            )
            deleted += [d for d in copy_round.lost if is_data_topic(d.topic)]
        except (UnreachableError, KafkaException, TimeoutError) as exc:
            raise MeasureError(
                f"flow {flow.name}: {error_text(exc) if isinstance(exc, KafkaException) else exc}"
            ) from None
        finally:
            context.close()
    return Unreplicated(restored, serving, tuple(f.name for f in flows), tuple(ranges), tuple(deleted))


def unreplicated_ranges(
    records: Iterable[Message], flow: str, serving_cluster_id: str, dest_topics: Mapping[str, str]
) -> list[UnreplicatedRange]:
    """Runs of the records (read_committed, in log order per partition, all past the flow's position) that the flow
    would copy into the serving cluster. A record the cycle rule keeps back ends a run; offsets the client never
    delivers (transaction markers, aborted records) do not."""
    runs: dict[tuple[str, int], list[UnreplicatedRange]] = {}
    broken: set[tuple[str, int]] = set()  # a kept-back record came after the partition's last run
    for message in records:
        key = (message.topic(), message.partition())
        try:
            chain = hops(message.headers())
        except ProvenanceError:
            chain = []  # the replicator refuses such a record, so it never left either
        if blocked(chain, serving_cluster_id, dest_topics[key[0]], message.timestamp()[1]):
            broken.add(key)
            continue
        partition_runs = runs.setdefault(key, [])
        if partition_runs and key not in broken:
            last = partition_runs[-1]
            partition_runs[-1] = UnreplicatedRange(
                flow, key[0], key[1], last.from_offset, message.offset(), last.records + 1
            )
        else:
            partition_runs.append(UnreplicatedRange(flow, key[0], key[1], message.offset(), message.offset(), 1))
        broken.discard(key)
    return [r for key in sorted(runs) for r in runs[key]]
