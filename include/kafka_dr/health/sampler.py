"""Health samples of a flow: what one `dr_replication_health` run (or `kafka-dr health`) measures, and the
history in the target's `_kdr.health` topic that the evaluator reads its windows from.

One sample per source partition: the flow's lag (kafka_dr.replication.lag), the source log start (for GAP),
and the time of the flow's newest progress record for that partition (Burrow's commit time). Flow-wide
findings come with it: destination drift, cycles among the newest destination records, heartbeat latency,
the tracked replicator's liveness, the newest group checkpoint.

A run is a handful of round trips: each cluster has one admin client whose requests go out together, the source's
half of the lag is measured while the target is opened, and everything read from the target (progress,
checkpoints, the sample history, heartbeats, the newest destination records) comes in one pass of one reader.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, KafkaException, Message, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from ..access import ClusterAccess
from ..clients import end_offsets, read_committed, start_offset
from ..replication import replicators
from ..replication.internal import CHECKPOINTS, HEALTH, HEARTBEATS, PROGRESS, ensure_internal_topics
from ..replication.lag import (
    HEARTBEAT_WINDOW,
    ClusterSide,
    LagError,
    heartbeat_latency,
    source_lag,
    source_partitions,
)
from ..replication.liveness import liveness
from ..replication.provenance import ProvenanceError, hops
from ..replication.topic_sync import dynamic_configs
from ..topology import Flow
from ..translation.checkpoints import load_pass_time, pass_time_in
from .rules import WINDOW, Cycle, Drift, FlowFindings, PartitionSample

CYCLE_SAMPLE = 5  # newest records per destination partition checked for a cycle: a sample, not a scan
CHECKPOINT_TAIL = 2_000  # newest `_kdr.checkpoints` records read for the flow's newest pass (else read back further)
RUN_CHUNK = 1_000  # samples per `_kdr.health` record: a run of a wide flow is a few records, each well under 1 MB
TIMEOUT_S = 10.0

Key = tuple[str, int]
_COLUMNS = tuple(f.name for f in fields(PartitionSample) if f.name != "time_ms")


@dataclass(frozen=True)
class Sample:
    """What one health run measured of a flow, and the flow's earlier samples (the window before this one)."""

    partitions: list[PartitionSample]
    findings: FlowFindings
    history: dict[Key, list[PartitionSample]]


@dataclass(frozen=True)
class _TargetRead:
    """What one health run read from the flow's target."""

    configs: dict[str, dict[str, str]]  # destination topic -> its dynamic configs
    records: dict[str, list[Message]]  # internal topic -> the records read, in log order
    dest_ends: dict[Key, int]  # destination partition -> its read_committed end offset
    whole: frozenset[str]  # internal topics read from their log start (or absent): nothing older is left to read


def take_sample(access: ClusterAccess, flow_name: str) -> Sample:
    """Measure one flow now. A cluster that cannot be reached gives no samples and a finding that says so."""
    flow = access.topology.flow(flow_name)
    source = ClusterSide("source", flow.name, access, flow.source, TIMEOUT_S)
    target = ClusterSide("target", flow.name, access, flow.target, TIMEOUT_S)
    reader = target.reader()
    try:
        return _sample(flow, source, target, reader)
    except LagError as exc:
        findings = FlowFindings(
            flow.name,
            _now_ms(),
            unreachable=str(exc),
            unreachable_cluster=None if exc.answered else exc.cluster,
            replicator_alive=_alive(flow.name, None),
        )
        return Sample([], findings, {})
    finally:
        reader.close()


def _sample(flow: Flow, source: ClusterSide, target: ClusterSide, reader: Consumer) -> Sample:
    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="kdr-health") as pool:
        opened = pool.submit(_open_target, target)
        listed = source_partitions(flow, source)
        measured = pool.submit(source_lag, flow, source, listed)  # the source's lag beside the target's reads
        target_id, topics = opened.result()
        present = sorted({tp.topic for tp in listed.partitions if flow.destination_topic(tp.topic) in topics})
        source_configs = pool.submit(_configs, source, present)
        read = _read_target(target, reader, flow, listed.partitions, topics, pool)
        keys = [(tp.topic, tp.partition) for tp in listed.partitions]
        history, complete = _windows_in(read.records[HEALTH], flow.name, keys)
        if not (complete or HEALTH in read.whole):  # other flows' samples crowd the tail: read further back
            history = load_windows(target.config, flow.name, keys, 4 * _health_span(len(keys)), target.admin)
        cycles = _cycles(target, target_id, read.dest_ends, history)
        drift = _drift(flow, listed.partitions, topics, source_configs.result(), read.configs)
        lag = measured.result()
    progress = _progress_times(read.records[PROGRESS], flow.name)
    heartbeat_s = heartbeat_latency(read.records[HEARTBEATS], lag.cluster_id)
    findings = FlowFindings(
        flow=flow.name,
        time_ms=lag.at_ms,
        drift=tuple(drift),
        cycles=tuple(
            Cycle(topic, partition, offset)
            for (topic, partition), offset in sorted(cycles.items())
            if offset is not None
        ),
        heartbeat_latency_ms=None if heartbeat_s is None else heartbeat_s * 1000,
        replicator_alive=_alive(flow.name, target.config),
        checkpoint_ms=_newest_pass(read, flow.name, target),
    )
    partitions = [
        PartitionSample(
            time_ms=lag.at_ms,
            topic=p.topic,
            partition=p.partition,
            dest_topic=p.dest_topic,
            source_start=p.start_offset,
            source_end=p.end_offset,
            committed=p.next_offset if p.committed else None,
            lag_records=p.lag_records,
            lag_seconds=p.lag_seconds,
            last_progress_ms=progress.get((p.topic, p.partition)),
            dest_end=read.dest_ends.get((p.dest_topic, p.partition)),
            cycle_offset=cycles.get((p.dest_topic, p.partition)),
        )
        for p in lag.partitions
    ]
    return Sample(partitions, findings, history)


def _open_target(target: ClusterSide) -> tuple[str, Mapping[str, Any]]:
    """The target's id and topic metadata, with the internal topics a health run writes made if missing."""
    cluster_id = target.cluster_id()
    topics = target.call("list topics", lambda: target.admin.list_topics(timeout=target.timeout).topics)
    if HEALTH not in topics or PROGRESS not in topics:
        target.call("create internal topics", lambda: ensure_internal_topics(target.admin, (HEALTH, PROGRESS)))
        topics = target.call("list topics", lambda: target.admin.list_topics(timeout=target.timeout).topics)
    return cluster_id, topics


def _read_target(
    target: ClusterSide,
    reader: Consumer,
    flow: Flow,
    partitions: list[TopicPartition],
    topics: Mapping[str, Any],
    pool: ThreadPoolExecutor,
) -> _TargetRead:
    """One round of offset and config requests (the destination partitions of the flow's source `partitions` among
    them), then one read of: `_kdr.progress` and `_kdr.checkpoints` whole, the tail of `_kdr.health` that holds the
    flow's last runs if it is alone, and the newest heartbeats."""
    dests = sorted(
        {
            (dest, tp.partition)
            for tp in partitions
            if (dest := flow.destination_topic(tp.topic)) in topics and tp.partition in topics[dest].partitions
        }
    )
    tails: dict[str, int | None] = {
        PROGRESS: None,
        CHECKPOINTS: CHECKPOINT_TAIL,  # for the newest pass (each pass ends with one): never the whole topic
        HEALTH: _health_span(len(partitions)),
        HEARTBEATS: HEARTBEAT_WINDOW,
    }
    internal = [TopicPartition(t, p) for t in tails if t in topics for p in topics[t].partitions]
    specs = (OffsetSpec.earliest(), OffsetSpec.latest())
    asked = (
        target.request_offsets(internal, specs[0]),
        target.request_offsets(internal + [TopicPartition(t, p) for t, p in dests], specs[1]),
    )
    # The broker answers a client's requests in order: the slower DescribeConfigs goes after the offsets.
    configs = pool.submit(_configs, target, sorted({topic for topic, _ in dests}))
    starts, ends = (target.answered_offsets(futures, spec) for futures, spec in zip(asked, specs, strict=True))
    ranges = {}
    for (topic, partition), start in starts.items():
        tail, end = tails[topic], ends[(topic, partition)]
        ranges[(topic, partition)] = (start if tail is None else max(start, end - tail), end)
    records: dict[str, list[Message]] = {topic: [] for topic in tails}
    for message in target.scan(ranges, reader=reader):
        records[message.topic()].append(message)
    cut = {topic for (topic, partition), (first, _) in ranges.items() if first > starts[(topic, partition)]}
    whole = frozenset(tails) - cut  # `_kdr.health` is there (_open_target made it); an absent topic has nothing older
    return _TargetRead(configs.result(), records, {key: ends[key] for key in dests}, whole)


def _cycles(
    target: ClusterSide, cluster_id: str, dest_ends: Mapping[Key, int], history: Mapping[Key, list[PartitionSample]]
) -> dict[Key, int | None]:
    """Per destination partition, the newest of its newest CYCLE_SAMPLE records whose provenance names the
    destination cluster and topic (a copy came back where it already was), or None. Only partitions that moved
    since the flow's previous sample are read: the others keep that sample's finding, as their newest records are
    the ones it checked. (A consumer of its own: librdkafka may hold a second assign() of one consumer for a second.)"""
    previous = {(window[-1].dest_topic, window[-1].partition): window[-1] for window in history.values() if window}
    found: dict[Key, int | None] = {}
    moved: dict[Key, tuple[int, int]] = {}
    for key, end in dest_ends.items():
        before = previous.get(key)
        if before is not None and before.dest_end == end:
            found[key] = before.cycle_offset
        else:
            found[key] = None
            moved[key] = (max(0, end - CYCLE_SAMPLE), end)
    for message in target.scan(moved):
        try:
            chain = hops(message.headers())
        except ProvenanceError:
            continue  # not a copy: cannot be a cycle
        if any(hop.cluster_id == cluster_id and hop.topic == message.topic() for hop in chain):
            found[(message.topic(), message.partition())] = message.offset()
    return found


def _configs(side: ClusterSide, topics: list[str]) -> dict[str, dict[str, str]]:
    """The dynamic configs of `topics` (topic_sync.dynamic_configs) on that side."""
    return side.call("describe configs", lambda: dynamic_configs(side.admin, topics, side.timeout))


def sample_records(flow: str, samples: list[PartitionSample]) -> list[tuple[str, bytes, Any]]:
    """The `_kdr.health` records of one run's samples (internal.put_many writes them): keyed by the flow, each holds
    up to RUN_CHUNK samples as rows of `columns`, so a window of a wide flow reads and decodes as a few records."""
    return [
        (
            HEALTH,
            flow.encode(),
            {
                "time_ms": samples[0].time_ms,
                "columns": _COLUMNS,
                "rows": [[getattr(s, name) for name in _COLUMNS] for s in samples[first : first + RUN_CHUNK]],
            },
        )
        for first in range(0, len(samples), RUN_CHUNK)
    ]


def load_windows(
    target_config: dict[str, Any],
    flow: str,
    partitions: Iterable[Key],
    span: int | None = None,
    admin: AdminClient | None = None,
) -> dict[Key, list[PartitionSample]]:
    """The last WINDOW samples of each partition, oldest first, read back from the end of `_kdr.health` (other
    flows' samples share the topic, so the read widens until it holds the flow's last WINDOW runs or the log starts).
    `span`: how many of the newest records to read first (default: enough if the flow is alone). `admin`: a client
    of the target already connected (a new one's first ListOffsets can wait 1-3 s in librdkafka's retry timer)."""
    partitions = list(partitions)
    if not partitions:
        return {}
    admin = admin or AdminClient(target_config)
    start = start_offset(admin, HEALTH, 0, TIMEOUT_S)
    end = end_offsets(admin, [(HEALTH, 0)], IsolationLevel.READ_COMMITTED, TIMEOUT_S)[(HEALTH, 0)]
    span = span or _health_span(len(partitions))
    while True:
        first = max(start, end - span)
        records = read_committed(target_config, {(HEALTH, 0): (first, end)}, TIMEOUT_S)
        found, complete = _windows_in(records, flow, partitions)
        if first == start or complete:
            return found
        span *= 4


def evaluation_key(flow: str) -> bytes:
    """The `_kdr.health` key of a flow's evaluation, written after each run's samples (health.check)."""
    return f"{flow}/__evaluation__".encode()


def _health_span(partitions: int) -> int:
    """How many of the newest `_kdr.health` records to read first: the flow's last WINDOW + 1 runs if it is alone
    (each run: its sample records and the evaluation)."""
    return (WINDOW + 1) * (max(1, -(-partitions // RUN_CHUNK)) + 1)


def _windows_in(
    records: Iterable[Message], flow: str, partitions: Iterable[Key]
) -> tuple[dict[Key, list[PartitionSample]], bool]:
    """The flow's last WINDOW samples of each partition among `_kdr.health` records (in log order), oldest first,
    and whether they are complete: the records hold more than WINDOW of the flow's runs, so the newest WINDOW are
    whole (a read from the log start is complete too, which the caller knows). A partition with fewer samples then
    is simply younger than the window."""
    rows: dict[Key, list[tuple[int, list[Any]]]] = {key: [] for key in partitions}
    runs: set[int] = set()
    key = flow.encode()
    for message in records:
        if message.key() != key or message.value() is None:
            continue
        run = json.loads(message.value())
        runs.add(run["time_ms"])
        columns = run["columns"]
        topic, partition = columns.index("topic"), columns.index("partition")
        order = None if tuple(columns) == _COLUMNS else [columns.index(name) for name in _COLUMNS]  # by name
        for row in run["rows"]:
            found = rows.get((row[topic], row[partition]))
            if found is not None:
                found.append((run["time_ms"], row if order is None else [row[i] for i in order]))
    windows = {key: [PartitionSample(at, *row) for at, row in found[-WINDOW:]] for key, found in rows.items()}
    return windows, len(runs) > WINDOW


def _newest_pass(read: _TargetRead, flow: str, target: ClusterSide) -> int | None:
    """When the flow's newest checkpoint pass ran: in the tail read, else (other flows' passes since) read back from
    the end of `_kdr.checkpoints`."""
    found = pass_time_in(read.records[CHECKPOINTS], flow)
    if found is None and CHECKPOINTS not in read.whole:
        found = target.call("read the newest checkpoint pass", lambda: load_pass_time(target.config, flow))
    return found


def _progress_times(records: Iterable[Message], flow: str) -> dict[Key, int]:
    """Per source partition, when the flow last recorded progress, from `_kdr.progress` records."""
    prefix = f"{flow}/".encode()
    times: dict[Key, int] = {}
    for message in records:
        key = message.key() or b""
        if not key.startswith(prefix):
            continue
        topic, _, partition = key[len(prefix) :].decode(errors="replace").rpartition("/")
        if topic and partition.isdigit():
            times[(topic, int(partition))] = max(times.get((topic, int(partition)), 0), message.timestamp()[1])
    return times


def _alive(flow: str, target_config: Mapping[str, Any] | None) -> bool | None:
    """Whether the flow's tracked continuous replicator runs, by its pid where it was started, else as its target
    sees it (liveness.py); None when none should (never started, or stopped on purpose, as a failover does) or
    when that cannot be told (its target unreachable)."""
    replicator = replicators.status(flow)
    if replicator is None or replicator.stopped_at is not None:
        return None
    if replicator.here:
        return replicator.running
    if target_config is None:
        return None
    try:
        return liveness(flow, dict(target_config)).running
    except KafkaException:
        return None


def _drift(
    flow: Flow,
    partitions: list[TopicPartition],
    target_topics: Mapping[str, Any],
    source_configs: Mapping[str, Mapping[str, str]],
    target_configs: Mapping[str, Mapping[str, str]],
) -> list[Drift]:
    """Destination topics missing, narrower or wider than their source, or with dynamic configs that differ."""
    widths: dict[str, int] = {}  # source topic -> its partition count
    dests: dict[str, str] = {}
    for tp in partitions:
        widths[tp.topic] = max(widths.get(tp.topic, 0), tp.partition + 1)
        dests[tp.topic] = flow.destination_topic(tp.topic)
    found: list[Drift] = []
    kind = "config" if flow.sync_topic_configs else "unsynced_config"
    for topic, dest in sorted(dests.items()):
        meta = target_topics.get(dest)
        if meta is None or meta.error is not None:
            found.append(Drift(topic, dest, "missing", f"{dest} does not exist in {flow.target}"))
            continue
        have, want = len(meta.partitions), widths[topic]
        if have != want:
            partitions = "fewer_partitions" if have < want else "more_partitions"
            found.append(Drift(topic, dest, partitions, f"{have} partitions in {flow.target}, {want} at the source"))
        wanted, had = source_configs.get(topic, {}), target_configs.get(dest, {})
        for key in sorted(set(wanted) | set(had)):
            if wanted.get(key) != had.get(key):
                detail = (
                    f"{key}: {wanted.get(key, 'default')} at the source, {had.get(key, 'default')} in {flow.target}"
                )
                found.append(Drift(topic, dest, kind, detail))
    return found


def _now_ms() -> int:
    return int(time.time() * 1000)
