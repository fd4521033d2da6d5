"""Health rules: from samples a flow's health runs took, a status per partition and per flow. No I/O.

A partition is judged over a sliding window of its last `WINDOW` samples with Burrow's rules, no
thresholds needed (linkedin/Burrow core/internal/evaluator/caching.go, calculatePartitionStatus): a
sample's "offset" is `committed`, its "lag" `lag_records`, its "timestamp" `last_progress_ms` (when the
flow last recorded progress, as Burrow uses commit times). kafka-dr adds what Burrow cannot see: GAP
(records deleted at the source before they were copied), a STOP that a zero-lag sample does not hide,
an early warning when lag grows without progress, and the flow-wide findings (DRIFT, CYCLE, the
topology's `health:` SLOs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from ..topology import Slo

WINDOW = 10
"""Samples per partition the evaluator looks at: the last 10, as Burrow's default window."""

STOP_MIN_MS = 60_000
"""Burrow's STOP compares the time since the last progress with the span of progress times in the window.
A window with one progress time (one sample, or samples taken faster than the flow records progress)
cannot show a span, so the flow is only called stopped after this long without progress."""

ERROR_STATUSES = frozenset({"STOP", "STALL", "REWIND", "GAP", "DRIFT", "CYCLE"})
"""Partition statuses that make their flow ERR."""

ERROR_DRIFTS = frozenset({"missing", "fewer_partitions", "config"})
"""Drift kinds that lose or change data at the destination: DRIFT, an error."""

WARN_DRIFTS = frozenset({"more_partitions", "unsynced_config"})
"""Drift kinds that copy correctly but deserve a look: WARN lines only."""


REPLICATOR_STOPPED = "STOP the flow's continuous replicator is not running"  # the problem line healing acts on


@dataclass(slots=True)  # not frozen: a run decodes thousands, and a frozen dataclass's __init__ costs ~6x as much
class PartitionSample:
    """One health sample of one source partition of a flow."""

    time_ms: int  # when the sample was taken
    topic: str  # source topic
    partition: int
    dest_topic: str
    source_start: int  # source log start offset
    source_end: int  # source read_committed end offset (last stable offset)
    committed: int | None  # the flow's next source offset to copy (None: the flow never committed here)
    lag_records: int  # records not yet copied (transaction markers not counted)
    lag_seconds: float  # age of the oldest uncopied record (0 when none)
    last_progress_ms: int | None  # time of the flow's newest progress record for this partition (None: none yet)
    dest_end: int | None = None  # destination read_committed end offset (None: no destination partition)
    cycle_offset: int | None = None  # newest destination record found naming the destination itself (CYCLE)


@dataclass(frozen=True)
class Drift:
    """A destination topic that no longer matches its source topic."""

    topic: str
    dest_topic: str
    kind: str  # one of ERROR_DRIFTS or WARN_DRIFTS
    detail: str  # one line, e.g. "3 partitions in dc2, 4 at the source"


@dataclass(frozen=True)
class Cycle:
    """A destination record whose provenance names (destination cluster, dest_topic): it was copied in a loop."""

    dest_topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class FlowFindings:
    """What one health run found about a flow as a whole (not windowed)."""

    flow: str
    time_ms: int
    drift: tuple[Drift, ...] = ()  # destination problems
    cycles: tuple[Cycle, ...] = ()  # destination records whose provenance names the destination itself
    heartbeat_latency_ms: float | None = None
    replicator_alive: bool | None = None  # None: no tracked continuous replicator for this flow
    checkpoint_ms: int | None = None  # newest group-offset checkpoint time
    unreachable: str | None = None  # one line when a cluster could not be reached (then no partitions)
    unreachable_cluster: str | None = None  # that cluster's name

    def to_dict(self) -> dict[str, Any]:
        """What the metrics read of a health run beside its evaluation (metrics.py)."""
        return {
            "heartbeat_latency_ms": self.heartbeat_latency_ms,
            "replicator_alive": self.replicator_alive,
            "checkpoint_ms": self.checkpoint_ms,
            "unreachable_cluster": self.unreachable_cluster,
        }


@dataclass(frozen=True)
class PartitionStatus:
    """The verdict on one source partition: OK WARN STOP STALL REWIND GAP DRIFT CYCLE."""

    topic: str
    partition: int
    status: str
    lag_records: int
    lag_seconds: float
    reason: str  # one line, "" for OK
    gap: tuple[int, int] | None = None  # (first, last) source offsets deleted before they were copied, inclusive

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "topic": self.topic,
            "partition": self.partition,
            "status": self.status,
            "lag_records": self.lag_records,
            "lag_seconds": self.lag_seconds,
        }
        if self.reason:
            d["reason"] = self.reason
        if self.gap is not None:
            d["gap"] = list(self.gap)
        return d


@dataclass(frozen=True)
class FlowHealth:
    """A flow's status (OK WARN ERR), its problems (one line each, without the flow name) and partitions.
    `stalled_seconds`: how long its replicator has run without copying records that wait (None: not stalled)."""

    name: str
    status: str
    problems: tuple[str, ...]
    partitions: tuple[PartitionStatus, ...]
    stalled_seconds: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """docs/design.md's JSON contract."""
        return {
            "name": self.name,
            "status": self.status,
            "problems": list(self.problems),
            "partitions": [p.to_dict() for p in self.partitions],
            "stalled_seconds": self.stalled_seconds,
        }

    def failure_line(self) -> str:
        """One line naming the flow, its status and every problem with its numbers, for a failed run."""
        return f"{self.name}: {self.status} " + "; ".join(self.problems or ("no problem named",))


Verdict = tuple[str, str, tuple[int, int] | None]
"""A partition rule's finding: status, reason, and the gap's offsets for GAP."""


def evaluate_partition(window: Sequence[PartitionSample], now_ms: int) -> PartitionStatus:
    """The status of a partition from its samples (oldest first; the last `WINDOW` count); first match wins."""
    if not window:
        raise ValueError("no sample to evaluate: the window must hold at least the current sample")
    window = tuple(window[-WINDOW:])
    newest = window[-1]
    status, reason, gap = (
        _gap(newest)
        or (("OK", "", None) if newest.lag_records == 0 else None)
        or _rewind(window)
        or _stop(window, now_ms)
        or _since_caught_up(window)
        or _stall(window)
        or ("OK", "", None)
    )
    return PartitionStatus(newest.topic, newest.partition, status, newest.lag_records, newest.lag_seconds, reason, gap)


def _committed(window: Sequence[PartitionSample]) -> list[int]:
    return [s.committed for s in window if s.committed is not None]


def _gap(newest: PartitionSample) -> Verdict | None:
    """GAP: records deleted at the source before they were copied. A flow that never committed starts where its
    `start:` says, and nothing is missing."""
    if newest.committed is None or newest.source_start <= newest.committed:
        return None
    first, last = newest.committed, newest.source_start - 1
    count = last - first + 1
    return (
        "GAP",
        f"{count} records deleted at the source before they were copied (offsets {first}-{last})",
        (first, last),
    )


def _rewind(window: Sequence[PartitionSample]) -> Verdict | None:
    for before, after in pairwise(_committed(window)):
        if after < before:
            return "REWIND", f"committed offset went back from {before} to {after}", None
    return None


def _stop(window: Sequence[PartitionSample], now_ms: int) -> Verdict | None:
    """STOP, checked before Burrow's rule 1: a replicator that stops while caught up would otherwise stay OK while a
    zero-lag sample remains in the window."""
    progress = [s.last_progress_ms for s in window if s.last_progress_ms is not None]
    if not progress:
        return "STOP", "no progress recorded by the flow", None
    first_ms, last_ms = progress[0], progress[-1]
    allowed_ms = last_ms - first_ms if len(set(progress)) > 1 else STOP_MIN_MS
    if now_ms - last_ms > allowed_ms:
        waiting = window[-1].lag_records
        return "STOP", f"no progress for {(now_ms - last_ms) / 1000:.0f}s ({waiting} records waiting)", None
    return None


def _since_caught_up(window: Sequence[PartitionSample]) -> Verdict | None:
    """Burrow's rule 1 (a zero-lag sample in the window) says OK; kafka-dr warns as soon as lag grows with no progress
    in between."""
    if not any(s.lag_records == 0 for s in window):
        return None
    if len(window) >= 2:
        previous, newest = window[-2], window[-1]
        if previous.committed == newest.committed and newest.lag_records > previous.lag_records:
            reason = f"lag growing ({previous.lag_records} -> {newest.lag_records} records), "
            return "WARN", reason + "no progress since the previous sample", None
    return "OK", "", None


def _stall(window: Sequence[PartitionSample]) -> Verdict | None:
    """STALL: the committed offset unchanged while records wait; else WARN when the lag never decreases."""
    offsets = _committed(window)
    if len(offsets) >= 2 and len(set(offsets)) == 1:
        waiting = window[-1].lag_records
        return (
            "STALL",
            f"committed offset {offsets[0]} unchanged over {len(offsets)} samples while {waiting} records wait",
            None,
        )
    lags = [s.lag_records for s in window]
    if len(lags) >= 2 and all(after >= before for before, after in pairwise(lags)):
        return "WARN", f"lag not decreasing over {len(lags)} samples ({lags[0]} -> {lags[-1]} records)", None
    return None


_OWN_LINE = frozenset({"WARN", "STOP", "STALL", "REWIND", "GAP"})
"""Partition statuses reported by a line of their own (DRIFT and CYCLE come with their finding's line)."""

_CYCLE_REASON = "provenance names this cluster and topic"


def evaluate_flow(
    name: str,
    windows: Mapping[tuple[str, int], Sequence[PartitionSample]],
    findings: FlowFindings,
    slo: Slo,
    now_ms: int,
) -> FlowHealth:
    """A flow's health: its partitions' statuses, then the flow-wide findings and SLOs on top."""
    if findings.unreachable:
        return FlowHealth(name, "ERR", (findings.unreachable,), ())
    keys = sorted(windows)
    statuses = {key: evaluate_partition(windows[key], now_ms) for key in keys}
    dest_topics = {key: windows[key][-1].dest_topic for key in keys}
    structural, broken, warned = _structural(findings, statuses, dest_topics)
    partitions = tuple(statuses[key] for key in keys)
    stalled = _stalled_seconds(windows, statuses, findings, now_ms)
    problems = [] if stalled is None else [_stalled_line(stalled, statuses)]
    # DRIFT and CYCLE partitions are reported once, by the finding's own line above.
    problems += [f"{p.status} {p.topic}[{p.partition}] {p.reason}" for p in partitions if p.status in _OWN_LINE]
    problems += structural
    if findings.replicator_alive is False:
        problems.append(REPLICATOR_STOPPED)
        broken = True
    breaches = _slo_breaches(partitions, findings, slo, now_ms)
    problems += breaches
    if broken or breaches or any(p.status in ERROR_STATUSES for p in partitions):
        status = "ERR"
    elif warned or any(p.status == "WARN" for p in partitions):
        status = "WARN"
    else:
        status = "OK"
    return FlowHealth(name, status, tuple(problems), partitions, stalled)


def _structural(
    findings: FlowFindings,
    statuses: dict[tuple[str, int], PartitionStatus],
    dest_topics: Mapping[tuple[str, int], str],
) -> tuple[list[str], bool, bool]:
    """The drift and cycle findings' lines, whether one makes the flow ERR and whether one makes it WARN (even when
    no sampled partition matches it); DRIFT and CYCLE override what the samples said of a partition, unless those
    already found an error (`statuses` is updated)."""
    structural: list[str] = []
    broken = warned = False

    def mark(key: tuple[str, int], status: str, reason: str) -> None:
        if statuses[key].status in ("OK", "WARN"):
            old = statuses[key]
            statuses[key] = PartitionStatus(old.topic, old.partition, status, old.lag_records, old.lag_seconds, reason)

    for drift in findings.drift:
        if drift.kind in ERROR_DRIFTS:
            structural.append(f"DRIFT {drift.topic} -> {drift.dest_topic}: {drift.detail}")
            broken = True
            for key in [key for key in statuses if key[0] == drift.topic]:
                mark(key, "DRIFT", drift.detail)
        elif drift.kind in WARN_DRIFTS:
            structural.append(f"WARN {drift.topic} -> {drift.dest_topic}: {drift.detail}")
            warned = True
        else:
            raise ValueError(f"unknown drift kind {drift.kind!r} for {drift.topic} -> {drift.dest_topic}")
    for cycle in findings.cycles:
        structural.append(f"CYCLE {cycle.dest_topic}[{cycle.partition}] offset {cycle.offset}: {_CYCLE_REASON}")
        broken = True
        for key in [key for key in statuses if (dest_topics[key], key[1]) == (cycle.dest_topic, cycle.partition)]:
            mark(key, "CYCLE", f"offset {cycle.offset}: {_CYCLE_REASON}")
    return structural, broken, warned


def _stalled_seconds(
    windows: Mapping[tuple[str, int], Sequence[PartitionSample]],
    statuses: Mapping[tuple[str, int], PartitionStatus],
    findings: FlowFindings,
    now_ms: int,
) -> float | None:
    """STALLED (Burrow's word for a consumer that is there and does not advance): the flow's replicator runs (its
    process or its claim renewals say so) while a partition with records waiting has shown no progress for as long
    as STOP needs. How long: since the oldest such partition's last progress. None when not stalled, or when no
    replicator is known to run (then it is STOP: nothing runs)."""
    if findings.replicator_alive is not True:
        return None
    since: list[int] = []
    for key, status in statuses.items():
        progress_ms = windows[key][-1].last_progress_ms
        if status.status == "STOP" and status.lag_records > 0 and progress_ms is not None:
            since.append(progress_ms)
    return None if not since else max(0.0, (now_ms - min(since)) / 1000)


def _stalled_line(seconds: float, statuses: Mapping[tuple[str, int], PartitionStatus]) -> str:
    waiting = sum(s.lag_records for s in statuses.values() if s.status == "STOP")
    return (
        f"STALLED for {seconds:.0f}s: the replicator runs but has copied none of the {waiting} records waiting in "
        f"its stopped partitions"
    )


def _slo_breaches(partitions: Sequence[PartitionStatus], findings: FlowFindings, slo: Slo, now_ms: int) -> list[str]:
    """One line per SLO of the topology's `health:` section the flow breaks (limits are inclusive)."""
    lines = []
    max_records = max((p.lag_records for p in partitions), default=0)
    max_seconds = max((p.lag_seconds for p in partitions), default=0.0)
    if slo.max_lag_records is not None and max_records > slo.max_lag_records:
        lines.append(f"SLO max_lag_records: {max_records} records behind (limit {slo.max_lag_records})")
    if slo.max_lag_seconds is not None and max_seconds > slo.max_lag_seconds:
        lines.append(f"SLO max_lag_seconds: {max_seconds:.1f}s behind (limit {slo.max_lag_seconds:g}s)")
    latency = findings.heartbeat_latency_ms
    if slo.max_heartbeat_latency_ms is not None and latency is not None and latency > slo.max_heartbeat_latency_ms:
        lines.append(
            f"SLO max_heartbeat_latency_ms: heartbeat latency {latency:.0f}ms "
            f"(limit {slo.max_heartbeat_latency_ms:g}ms)"
        )
    if slo.max_checkpoint_age_s is not None:
        limit = f"(limit {slo.max_checkpoint_age_s:g}s)"
        if findings.checkpoint_ms is None:
            lines.append(f"SLO max_checkpoint_age_s: no checkpoint yet {limit}")
        elif (age := (now_ms - findings.checkpoint_ms) / 1000) > slo.max_checkpoint_age_s:
            lines.append(f"SLO max_checkpoint_age_s: newest checkpoint {age:.0f}s old {limit}")
    return lines


def render_table(flows: Sequence[FlowHealth]) -> str:
    """One aligned row per flow, each non-OK flow followed by its problem lines, indented."""
    header = ("FLOW", "STATUS", "MAX LAG RECORDS", "MAX LAG SECONDS", "PROBLEMS")
    rows = [header]
    for flow in flows:
        lags = [(p.lag_records, p.lag_seconds) for p in flow.partitions]
        records = str(max(r for r, _ in lags)) if lags else "-"
        seconds = f"{max(s for _, s in lags):.3f}" if lags else "-"
        rows.append((flow.name, flow.status, records, seconds, str(len(flow.problems))))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    numeric = {2, 3, 4}

    def line(row: tuple[str, ...]) -> str:
        cells = (c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        return "  ".join(cells).rstrip()

    lines = [line(header)]
    for flow, row in zip(flows, rows[1:], strict=True):
        lines.append(line(row))
        if flow.status != "OK":
            lines += [f"    {problem}" for problem in flow.problems]
    return "\n".join(lines)
