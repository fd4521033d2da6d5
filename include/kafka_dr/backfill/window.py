"""What a backfill copies: exactly the source records of a window that a target topic lacks.

A window is a time range (start inclusive, end exclusive, resolved per partition with offsetsForTimes, as
`kafka-consumer-groups --to-datetime` does) or offset ranges per partition. The copies are made by the copier under
the flow `<flow>.backfill` (its own writer slots, progress keys and source group), so a backfill never moves the
flow's own position. What the target already holds of the window is found by provenance, so a rerun copies nothing.

A Kafka partition is an append-only log: copies of older records appended to the flow's own destination after
newer copies would be read after them, and resume, lag, verify and offset translation read a partition's copies
in source order. So the flow's destination is a target only where the window's copies come in order: the
destination holds no copy at or past the window's first offset and the flow itself is at or past it. Otherwise the
backfill is refused with one line pointing to a separate target such as `{topic}.backfill`.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from ..access import ClusterAccess
from ..clients import read_partition
from ..replication.flow_clients import FlowClients
from ..replication.internal import HEARTBEATS
from ..replication.provenance import copied_from
from ..replication.resume import resume_offset
from ..replication.rounds import CopyRounds
from ..runbooks import see_runbook
from ..times import epoch_ms
from ..topology import INTERNAL_TOPIC_PREFIX, Flow, TopicFilter

BACKFILL_SUFFIX = ".backfill"  # the copier's flow name for a backfill of flow F: F.backfill
_TOPIC_NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,249}")
_OFFSETS_KEY_RE = re.compile(r"(?P<topic>[A-Za-z0-9._-]+):(?P<partition>\d+)")


class BackfillError(ValueError):
    """A bad backfill request; one line naming what is wrong, before anything changes."""


@dataclass(frozen=True)
class Window:
    """Times in epoch ms (start inclusive, end exclusive), or inclusive offset ranges by (topic, partition)."""

    start_ms: int | None = None
    end_ms: int | None = None
    offsets: Mapping[tuple[str, int], tuple[int, int]] | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.offsets is not None:
            return {"offsets": {f"{t}:{p}": list(r) for (t, p), r in sorted(self.offsets.items())}}
        return {"start_ms": self.start_ms, "end_ms": self.end_ms}


def parse_window(
    start: str | None, end: str | None, offsets: str | Mapping[str, Any] | None, now_ms: int | None = None
) -> Window:
    """A window from the DAG's or the job's params: window_start and window_end (ISO times) or offsets
    ({"topic:partition": [first, last]}, inclusive, as JSON text or a mapping)."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    if offsets not in (None, "", {}):
        if start or end:
            raise BackfillError("give window_start/window_end or offsets, not both")
        return Window(offsets=_parse_offsets(offsets))
    if not start or not end:
        raise BackfillError("a window needs both window_start and window_end (or offsets)")
    try:
        start_ms, end_ms = epoch_ms(start, "window_start"), epoch_ms(end, "window_end")
    except ValueError as exc:
        raise BackfillError(str(exc)) from None
    if end_ms <= start_ms:
        raise BackfillError(f"window_end {end} is not after window_start {start}")
    if end_ms > now_ms:
        raise BackfillError(f"window_end {end} is in the future: records of it may still come")
    return Window(start_ms, end_ms)


def _parse_offsets(offsets: str | Mapping[str, Any]) -> dict[tuple[str, int], tuple[int, int]]:
    if isinstance(offsets, str):
        try:
            offsets = json.loads(offsets)
        except ValueError:
            raise BackfillError(f"offsets: not JSON: {offsets[:80]!r}") from None
    if not isinstance(offsets, Mapping) or not offsets:
        raise BackfillError('offsets: expected {"topic:partition": [first, last]}')
    parsed = {}
    for key, value in offsets.items():
        match = _OFFSETS_KEY_RE.fullmatch(str(key))
        ok = isinstance(value, list | tuple) and len(value) == 2 and all(type(v) is int and v >= 0 for v in value)
        if match is None or not ok or value[0] > value[1]:
            raise BackfillError(
                f'offsets: {key!r}: {value!r}: expected "topic:partition": [first, last], first <= last'
            )
        parsed[(match["topic"], int(match["partition"]))] = (value[0], value[1])
    return parsed


def backfill_flow(flow: Flow, topics: str | None, target_topic: str | None, source_topics: Iterable[str]) -> Flow:
    """The flow the copier runs for the backfill: the flow's source topics matching `topics` (all of them when
    None), each copied to `target_topic` (a format with {topic}, or a plain name for one topic; default the
    flow's rename), named `<flow>.backfill`."""
    try:
        pattern = re.compile(topics or ".*")
    except re.error as exc:
        raise BackfillError(f"topics: bad regex {topics!r}: {exc}") from None
    selected = sorted(t for t in source_topics if flow.topics.matches(t) and pattern.fullmatch(t))
    if not selected:
        raise BackfillError(f"topics {topics!r} selects none of the topics flow {flow.name} copies from {flow.source}")
    targets = {t: _target_name(flow, t, target_topic) for t in selected}
    if target_topic and "{topic}" not in target_topic and len(selected) > 1:
        raise BackfillError(f"target_topic {target_topic!r} has no {{topic}} but {len(selected)} topics are selected")
    return dataclasses.replace(
        flow,
        name=flow.name + BACKFILL_SUFFIX,
        topics=TopicFilter(include=tuple(re.compile(re.escape(t)) for t in selected)),
        rename={re.escape(t): target for t, target in targets.items()},
    )


def _target_name(flow: Flow, topic: str, fmt: str | None) -> str:
    if not fmt:
        return flow.destination_topic(topic)
    try:
        name = fmt.format(topic=topic)
    except (KeyError, IndexError, ValueError):
        raise BackfillError(f"target_topic {fmt!r}: only a plain {{topic}} placeholder is allowed") from None
    if not _TOPIC_NAME_RE.fullmatch(name) or name.startswith(INTERNAL_TOPIC_PREFIX) or name in (".", ".."):
        raise BackfillError(f"target_topic {fmt!r} makes {name!r}, not a legal topic name outside kafka-dr's own")
    return name


@dataclass(frozen=True)
class PartitionWindow:
    """The window in one source partition: offsets [first, end), with what retention deleted before it."""

    topic: str
    partition: int
    dest_topic: str
    first: int
    end: int
    unavailable: tuple[int | None, int] | None = None  # inclusive; from None: deleted, the window may start there

    @property
    def key(self) -> tuple[str, int]:
        return self.topic, self.partition


def resolve(context: Any, window: Window) -> list[PartitionWindow]:
    """Per source partition of the backfill flow (`context`: its open FlowClients), the window's offsets.
    Offsets past the end of a partition, or of a partition or topic the flow does not copy, are refused."""
    counts = {t: n for t, n in context.source_partitions().items() if t != HEARTBEATS}
    tps = [TopicPartition(t, p) for t, n in sorted(counts.items()) for p in range(n)]
    if window.offsets is not None:
        unknown = [f"{t}:{p}" for t, p in window.offsets if p >= counts.get(t, 0)]
        if unknown:
            raise BackfillError(f"offsets: {', '.join(unknown)}: no such partition among the backfill's topics")
        tps = [tp for tp in tps if (tp.topic, tp.partition) in window.offsets]
    if not tps:
        return []
    starts = context.offsets(tps, OffsetSpec.earliest())
    ends = context.offsets(tps, OffsetSpec.latest())
    if window.offsets is not None:
        ranges = {key: (first, last + 1) for key, (first, last) in window.offsets.items()}
        past = [f"{t}:{p} ends at {ends[(t, p)]}" for (t, p), (_, end) in ranges.items() if end > ends[(t, p)]]
        if past:
            raise BackfillError(f"offsets past the end of their partition: {', '.join(past)}")
    else:
        firsts = context.offsets(tps, OffsetSpec.for_timestamp(window.start_ms))
        lasts = context.offsets(tps, OffsetSpec.for_timestamp(window.end_ms))
        ranges = {key: (_or_end(firsts[key], ends[key]), _or_end(lasts[key], ends[key])) for key in ends}
    windows = []
    for tp in tps:
        key = (tp.topic, tp.partition)
        first, end = ranges[key]
        unavailable = None
        if window.offsets is not None and first < starts[key]:
            unavailable = (first, min(end, starts[key]) - 1)
        elif window.offsets is None and first == starts[key] > 0:
            # offsetsForTimes sees retained records only: the window may have begun in the deleted ones
            unavailable = (None, starts[key] - 1)
        first = max(first, starts[key])
        windows.append(
            PartitionWindow(tp.topic, tp.partition, context.dest_topic(tp.topic), first, max(first, end), unavailable)
        )
    return windows


def _or_end(offset: int, end: int) -> int:
    return end if offset < 0 else offset


@dataclass(frozen=True)
class PresenceTask:
    """Which offsets of a window the target topic holds, by provenance (one Spark task per partition)."""

    target_config: dict[str, Any]
    source_cluster_id: str
    window: PartitionWindow


class Presence(NamedTuple):
    """What the target holds of one partition's window: the [first, end) runs it lacks and how many offsets it has."""

    window: PartitionWindow
    missing: list[tuple[int, int]]
    present: int


def missing_ranges(task: PresenceTask) -> Presence:
    """The window, its [first, end) runs the target lacks, and how many offsets of it the target already holds."""
    window = task.window
    present = _present_offsets(task) if window.end > window.first else set()
    return Presence(window, _gaps(window.first, window.end, present), len(present))


def _present_offsets(task: PresenceTask) -> set[int]:
    """The window's source offsets the target topic holds a copy of, by provenance."""
    window = task.window
    origin = (task.source_cluster_id, window.topic, window.partition)
    consumer = Consumer(
        {
            **task.target_config,
            "group.id": "kdr-backfill-presence",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    try:
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(window.dest_topic, window.partition), timeout=15)
        except KafkaException as exc:
            if exc.args[0].code() not in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION):
                raise
            return set()  # the target topic is made when the copy starts
        copies = read_partition(consumer, window.dest_topic, window.partition, low, high, 60) if high > low else []
        offsets = (copied_from(message.headers(), origin) for message in copies)
        return {offset for offset in offsets if offset is not None and window.first <= offset < window.end}
    finally:
        consumer.close()


def _gaps(first: int, end: int, present: set[int]) -> list[tuple[int, int]]:
    """The [a, b) runs of [first, end) outside `present`, in order."""
    runs, start = [], None
    for offset in range(first, end):
        if offset in present:
            if start is not None:
                runs.append((start, offset))
                start = None
        elif start is None:
            start = offset
    if start is not None:
        runs.append((start, end))
    return runs


def live_destination_refusals(flow_context: Any, windows: Iterable[PartitionWindow]) -> list[str]:
    """Why the flow's own destination cannot take these windows' copies in order (empty: it can). `flow_context`
    is the live flow's open FlowClients."""
    live = [w for w in windows if w.dest_topic == flow_context.dest_topic(w.topic) and w.end > w.first]
    if not live:
        return []
    copy_round = CopyRounds(flow_context).next(sync=False)
    positions = {(t.topic, t.partition): t.start for t in copy_round.tasks}
    problems = []
    for w in live:
        last = resume_offset(
            flow_context.reader, w.dest_topic, w.partition, flow_context.source_cluster_id, w.topic, None
        )
        position = positions.get(w.key, 0)
        if last is not None and last > w.first:
            problems.append(f"{w.dest_topic}[{w.partition}] holds copies of offsets past {w.first}")
        elif position < w.first:
            problems.append(
                f"flow {flow_context.flow.name} has not copied {w.topic}[{w.partition}] up to {w.first} yet"
            )
    return problems


@dataclass
class Prepared:
    """A checked backfill: the copier's flow, its context (read-only; the caller closes it) and the windows."""

    flow: Flow
    context: FlowClients
    windows: list[PartitionWindow]


def prepare(
    access: ClusterAccess, flow: Flow, window: Window, topics: str | None, target_topic: str | None, retries: int = 5
) -> Prepared:
    """Everything a backfill checks before it changes anything (the DAG's first task and the job share it): the
    topics within the flow, the target names, the window per partition, and the order of the flow's destination.
    A bad request raises BackfillError with one line."""
    live = FlowClients(access, flow, retries=retries).open()
    try:
        backfill = backfill_flow(flow, topics, target_topic, live.source_partitions())
        context = FlowClients(access, backfill, retries=retries).open()
        try:
            windows = resolve(context, window)
            refusals = live_destination_refusals(live, windows)
        except BaseException:
            context.close()
            raise
    finally:
        live.close()
    if refusals:
        context.close()
        raise BackfillError(
            f"the window's copies would land after newer ones in flow {flow.name}'s destination ({'; '.join(refusals)})"
            f": backfill into a separate topic, e.g. target_topic '{{topic}}.backfill'; "
            + see_runbook("dr_backfill", "the-target-would-take-copies-out-of-order")
        )
    return Prepared(backfill, context, windows)
