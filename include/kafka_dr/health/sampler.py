"""Health samples of a flow: what one `dr_replication_health` run (or `kafka-dr health`) measures, and the
history in the target's `_kdr.health` topic that the evaluator reads its windows from.

One sample per source partition: the flow's lag (kafka_dr.replication.lag), the source log start (for GAP),
and the time of the flow's newest progress record for that partition (Burrow's commit time). Flow-wide
findings come with it: destination drift, cycles among the newest destination records, heartbeat latency,
the tracked replicator's liveness, the newest group checkpoint.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from ..clients import client_config, end_offsets, error_text, read_committed
from ..replication import replicators
from ..replication.internal import HEALTH, PROGRESS, ensure_internal_topics, partition_key, read_records
from ..replication.lag import FlowLag, LagError, flow_lag
from ..replication.provenance import ProvenanceError, hops
from ..replication.topic_sync import dynamic_configs
from ..topology import Flow, Topology
from ..translation.checkpoints import load_checkpoints
from .rules import WINDOW, Cycle, Drift, FlowFindings, PartitionSample

CYCLE_SAMPLE = 5  # newest records per destination partition checked for a cycle: a sample, not a scan
TIMEOUT_S = 10.0

Key = tuple[str, int]


@dataclass(frozen=True)
class Sample:
    """What one health run measured of a flow, and the flow's earlier samples (the window before this one)."""

    partitions: list[PartitionSample]
    findings: FlowFindings
    history: dict[Key, list[PartitionSample]]


def take_sample(topology: Topology, flow_name: str, environ: Mapping[str, str] | None = None) -> Sample:
    """Measure one flow now. Independent reads run side by side (each is mostly waiting on a broker); a cluster
    that cannot be reached gives no samples and a finding that says so."""
    flow = topology.flow(flow_name)
    source_config = client_config(topology.cluster(flow.source), environ)
    target_config = client_config(topology.cluster(flow.target), environ)
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="kdr-health") as pool:
        lag_read = pool.submit(flow_lag, topology, flow.name, timeout=TIMEOUT_S, environ=environ)
        progress_read = pool.submit(_progress_times, target_config, flow.name)
        checkpoint_read = pool.submit(load_checkpoints, target_config, flow.name)
        target_admin = AdminClient(target_config)
        topics_made = pool.submit(ensure_internal_topics, target_admin, (HEALTH, PROGRESS), TIMEOUT_S)
        target_topics = pool.submit(lambda: target_admin.list_topics(timeout=TIMEOUT_S).topics)
        try:
            lag = lag_read.result()
        except LagError as exc:
            findings = FlowFindings(flow.name, _now_ms(), unreachable=str(exc), replicator_alive=_alive(flow.name))
            return Sample([], findings, {})
        try:
            keys = [(p.topic, p.partition) for p in lag.partitions]
            history_read = pool.submit(load_windows, target_config, flow.name, keys)
            topics = target_topics.result()
            drift_read = pool.submit(_drift, flow, lag, source_config, target_admin, topics)
            cycles_read = pool.submit(_cycles, target_config, target_admin, topics, lag)
            progress = progress_read.result()
            findings = FlowFindings(
                flow=flow.name,
                time_ms=lag.measured_at_ms,
                drift=tuple(drift_read.result()),
                cycles=tuple(cycles_read.result()),
                heartbeat_latency_ms=None if lag.heartbeat_latency_s is None else lag.heartbeat_latency_s * 1000,
                replicator_alive=_alive(flow.name),
                checkpoint_ms=checkpoint_read.result()[1],
            )
            topics_made.result()
            history = history_read.result()
        except (KafkaException, TimeoutError, RuntimeError) as exc:
            where = f"target cluster {flow.target} ({topology.cluster(flow.target).bootstrap_servers})"
            unreachable = f"flow {flow.name}: {where}: {error_text(exc)}"
            return Sample([], FlowFindings(flow.name, _now_ms(), unreachable=unreachable), {})
    partitions = [
        PartitionSample(
            time_ms=lag.measured_at_ms,
            topic=p.topic,
            partition=p.partition,
            dest_topic=p.dest_topic,
            source_start=p.start_offset,
            source_end=p.end_offset,
            committed=p.next_offset if p.committed else None,
            lag_records=p.lag_records,
            lag_seconds=p.lag_seconds,
            last_progress_ms=progress.get((p.topic, p.partition)),
        )
        for p in lag.partitions
    ]
    return Sample(partitions, findings, history)


def sample_records(flow: str, samples: Iterable[PartitionSample]) -> list[tuple[str, bytes, Any]]:
    """The `_kdr.health` records of these samples, keyed flow/topic/partition (internal.put_many writes them)."""
    return [(HEALTH, partition_key(flow, s.topic, s.partition), s.to_dict()) for s in samples]


def load_windows(
    target_config: dict[str, Any], flow: str, partitions: Iterable[Key]
) -> dict[Key, list[PartitionSample]]:
    """The last WINDOW samples of each partition, oldest first, read back from the end of `_kdr.health` (other
    flows' samples share the topic, so the read widens until each partition has its window or the log starts)."""
    wanted = {partition_key(flow, t, p): (t, p) for t, p in partitions}
    windows: dict[Key, list[PartitionSample]] = {key: [] for key in wanted.values()}
    if not wanted:
        return windows
    admin = AdminClient(target_config)
    tp = TopicPartition(HEALTH, 0)
    start = admin.list_offsets({tp: OffsetSpec.earliest()}, request_timeout=TIMEOUT_S)[tp].result().offset
    end = end_offsets(admin, [(HEALTH, 0)], IsolationLevel.READ_COMMITTED, TIMEOUT_S)[(HEALTH, 0)]
    span = 2 * WINDOW * len(wanted)
    while True:
        first = max(start, end - span)
        found: dict[Key, list[PartitionSample]] = {key: [] for key in wanted.values()}
        for message in read_committed(target_config, {(HEALTH, 0): (first, end)}, TIMEOUT_S):
            key = wanted.get(message.key() or b"")
            if key is not None and message.value() is not None:
                found[key].append(PartitionSample.from_dict(json.loads(message.value())))
        if first == start or all(len(s) >= WINDOW for s in found.values()):
            return {key: samples[-WINDOW:] for key, samples in found.items()}
        span *= 4


def _progress_times(target_config: dict[str, Any], flow: str) -> dict[Key, int]:
    """Per source partition, when the flow last recorded progress in the target's `_kdr.progress`."""
    prefix = f"{flow}/".encode()
    times: dict[Key, int] = {}
    for message in read_records(target_config, PROGRESS, TIMEOUT_S):
        key = message.key() or b""
        if not key.startswith(prefix):
            continue
        topic, _, partition = key[len(prefix) :].decode(errors="replace").rpartition("/")
        if topic and partition.isdigit():
            times[(topic, int(partition))] = max(times.get((topic, int(partition)), 0), message.timestamp()[1])
    return times


def _alive(flow: str) -> bool | None:
    """Whether the flow's tracked continuous replicator runs; None when none should (never started, or stopped
    on purpose, as a failover does)."""
    replicator = replicators.status(flow)
    if replicator is None or replicator.stopped_at is not None:
        return None
    return replicator.running


def _drift(
    flow: Flow, lag: FlowLag, source_config: dict[str, Any], target_admin: AdminClient, target_topics: Mapping[str, Any]
) -> list[Drift]:
    """Destination topics missing, narrower or wider than their source, or with configs that differ
    (`target_topics`: the target's topic metadata)."""
    source_partitions: dict[str, int] = {}
    dests: dict[str, str] = {}
    for p in lag.partitions:
        source_partitions[p.topic] = max(source_partitions.get(p.topic, 0), p.partition + 1)
        dests[p.topic] = p.dest_topic
    found: list[Drift] = []
    present = []
    for topic, dest in sorted(dests.items()):
        meta = target_topics.get(dest)
        if meta is None or meta.error is not None:
            found.append(Drift(topic, dest, "missing", f"{dest} does not exist in {flow.target}"))
            continue
        present.append(topic)
        have, want = len(meta.partitions), source_partitions[topic]
        if have != want:
            kind = "fewer_partitions" if have < want else "more_partitions"
            found.append(Drift(topic, dest, kind, f"{have} partitions in {flow.target}, {want} at the source"))
    if present:
        source = dynamic_configs(AdminClient(source_config), present, TIMEOUT_S)
        target = dynamic_configs(target_admin, [dests[t] for t in present], TIMEOUT_S)
        kind = "config" if flow.sync_topic_configs else "unsynced_config"
        for topic in present:
            want, have = source.get(topic, {}), target.get(dests[topic], {})
            for key in sorted(set(want) | set(have)):
                if want.get(key) != have.get(key):
                    detail = (
                        f"{key}: {want.get(key, 'default')} at the source, {have.get(key, 'default')} in {flow.target}"
                    )
                    found.append(Drift(topic, dests[topic], kind, detail))
    return found


def _cycles(
    target_config: dict[str, Any], target_admin: AdminClient, topics: Mapping[str, Any], lag: FlowLag
) -> list[Cycle]:
    """Among the newest CYCLE_SAMPLE records of each destination partition, those whose provenance names the
    destination cluster and topic: a copy came back where it already was."""
    target_id = target_admin.describe_cluster(request_timeout=TIMEOUT_S).result().cluster_id
    partitions = [
        (p.dest_topic, p.partition)
        for p in lag.partitions
        if p.dest_topic in topics and p.partition in topics[p.dest_topic].partitions
    ]
    if not partitions:
        return []
    ends = end_offsets(target_admin, partitions, IsolationLevel.READ_COMMITTED, TIMEOUT_S)
    ranges = {key: (max(0, end - CYCLE_SAMPLE), end) for key, end in ends.items() if end > 0}
    found = []
    for message in read_committed(target_config, ranges, TIMEOUT_S):
        try:
            chain = hops(message.headers())
        except ProvenanceError:
            continue  # not a copy: cannot be a cycle
        if any(hop.cluster_id == target_id and hop.topic == message.topic() for hop in chain):
            found.append(Cycle(message.topic(), message.partition(), message.offset()))
    return found


def _now_ms() -> int:
    return int(time.time() * 1000)
