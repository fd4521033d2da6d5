"""The switch back's Kafka side: which flows resync (listing the serving cluster's topics), and the restored
cluster's ends just before producers move back."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from confluent_kafka import IsolationLevel, KafkaException

from ..access import ClusterAccess
from ..client_switch import SWITCH_CHECK_S
from ..clients import end_offsets, error_text
from .plan import FailbackPlan, SwitchBack
from .resync import resync_flows

# The catch-up resync after producers moved back copies until the serving cluster got nothing new for this long:
# a following producer reads its alias at least every SWITCH_CHECK_S while it produces, so what it wrote there in
# its last moments is copied too instead of staying behind the bounded run's ends (the lag gate would wait for it
# forever, with no replicator running).
CATCH_UP_QUIET_S = 2 * SWITCH_CHECK_S


class SwitchBackError(RuntimeError):
    """A cluster did not answer while the switch back was prepared; one line."""


def prepare_switch_back(
    plan: FailbackPlan, access: ClusterAccess, derived_file: Path, run_started: datetime
) -> SwitchBack:
    """The flows that resync (the topology's flows back, and the inverses of the flows out for the serving cluster's
    topics no flow back covers, in `derived_file`: kafka_dr.failback.resync) and the switch back over them. Raises
    TopologyError or SwitchBackError with one line."""
    try:
        serving_topics = access.admin(plan.serving).list_topics(timeout=30).topics
    except KafkaException as exc:
        raise SwitchBackError(f"cluster {plan.serving}: list topics failed: {error_text(exc)}") from None
    topology, flows, inverse = resync_flows(
        Path(plan.topology), plan.restored, plan.serving, serving_topics, derived_file
    )
    return SwitchBack.build(plan, str(topology), flows, inverse, run_started)


def restored_ends(back: SwitchBack, access: ClusterAccess) -> dict[str, dict[str, int]]:
    """Per resync flow, the end offsets ({"topic:partition": offset}) of its destination partitions in the restored
    cluster just before producers move back. From there, a record that is not a copy from the serving cluster (what
    the moved producers write, interleaved with the last copies of the resync) was never seen by the groups reading
    the serving cluster: translating back, a group resumes no later than the first of them, so none is skipped (the
    copies after it are read twice). Only the flows' own partitions: the mapping goes on each translation job's
    command line. Raises SwitchBackError with one line."""
    topology = access.topology
    serving, restored = access.admin(back.failover.failed), access.admin(back.failover.target)
    try:
        serving_topics = serving.list_topics(timeout=30).topics
        restored_topics = restored.list_topics(timeout=30).topics
        destinations = {
            name: {flow.destination_topic(t) for t in serving_topics if flow.copies_data(t)} & set(restored_topics)
            for name in back.flows
            for flow in (topology.flow(name),)
        }
        partitions = [(t, p) for t in set().union(*destinations.values()) for p in restored_topics[t].partitions]
        ends = end_offsets(restored, partitions, IsolationLevel.READ_UNCOMMITTED) if partitions else {}
    except KafkaException as exc:
        raise SwitchBackError(f"failback: end offsets not read: {error_text(exc)}") from None
    return {
        name: {f"{t}:{p}": end for (t, p), end in sorted(ends.items()) if t in topics}
        for name, topics in destinations.items()
    }
