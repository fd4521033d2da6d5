"""The copy side of a replicator run, epoch after epoch (MirrorMaker 2's source task), with no Spark in it: the
job hands over how a group of copy tasks runs (a Spark job, or anything else that returns their results).

`Positions`: where each source partition's copy stands between epochs, so that a continuous epoch reopens every
range where the last one stopped. `Discovery`: copy rounds (topic sync, new topics and partitions, rounds.py) on a
thread beside the copies, so that their round trips add nothing to the replication latency. `CopyEpochs`: one epoch
at a time, under the driver's claim on the flow.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from .copier import CopyResult, CopyTask, FencedError
from .fencing import writer_groups
from .rounds import CopyRound

log = logging.getLogger(__name__)

FENCED_RETRIES = 5  # epochs in a row whose writers an older replicator fenced, before giving up

Key = tuple[str, int]  # source topic, partition
RunJob = Callable[[list[list[CopyTask]]], list[CopyResult]]  # runs writer groups of tasks, returns their results


class Claim(Protocol):
    def holds(self) -> bool: ...


class Positions:
    """Per source partition, the next offset to copy and the destination offset the next take-over reads from."""

    def __init__(self, first: CopyRound) -> None:
        self.next: dict[Key, int] = {(t.topic, t.partition): t.start for t in first.tasks}
        self.dest_from: dict[Key, int] = {(t.topic, t.partition): t.dest_from for t in first.tasks}

    def merge(self, discovered: CopyRound) -> CopyRound:
        """A discovery round, keeping the positions copied meanwhile for partitions already known."""
        for task in discovered.tasks:
            self.next.setdefault((task.topic, task.partition), task.start)
            self.dest_from.setdefault((task.topic, task.partition), task.dest_from)
        return discovered

    def open_tasks(self, copy_round: CopyRound) -> list[CopyTask]:
        """The round's ranges from where each stands, left open (continuous: copied as records arrive)."""
        return [
            dataclasses.replace(
                t, start=self.next[(t.topic, t.partition)], end=None, dest_from=self.dest_from[(t.topic, t.partition)]
            )
            for t in copy_round.tasks
        ]

    def update(self, results: list[CopyResult]) -> None:
        for r in results:
            self.next[(r.topic, r.partition)] = r.next
            self.dest_from[(r.topic, r.partition)] = r.dest_end


class Discovery:
    """Copy rounds on a thread of their own, beside the copies: the first `interval` seconds after the first
    poll, each next one `interval` seconds after the last one was picked up, from the positions of the
    latest poll. A round that finds partitions those positions lack calls `found_new` as it ends (the replicator
    then ends the epoch under way, so that they are copied at once rather than at the epoch's deadline)."""

    def __init__(
        self,
        next_round: Callable[[dict[Key, int]], CopyRound],
        interval: float,
        found_new: Callable[[], None] | None = None,
    ) -> None:
        self.next_round, self.interval, self.found_new = next_round, interval, found_new
        self._lock = threading.Lock()
        self._positions: dict[Key, int] = {}
        self._found: CopyRound | None = None
        self._error: BaseException | None = None
        self._picked_up = threading.Event()  # the last round was picked up (or the rounds end)
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def poll(self, positions: dict[Key, int]) -> CopyRound | None:
        """The round that ended since the last poll (a failed round raises its error here)."""
        with self._lock:
            self._positions = dict(positions)
            found, self._found = self._found, None
            if self._error is not None:
                raise self._error
        if self._thread is None:
            self._thread = threading.Thread(target=self._rounds, name="kdr-discovery", daemon=True)
            self._thread.start()
        if found is not None:
            self._picked_up.set()
        return found

    def _rounds(self) -> None:
        while not self._closed.wait(self.interval):
            with self._lock:
                positions = self._positions
            try:
                found = self.next_round(positions)
            except Exception as exc:  # noqa: BLE001 - raised to the run at its next poll
                with self._lock:
                    self._error = exc
                return
            with self._lock:
                self._found = found
                self._picked_up.clear()
            if self.found_new is not None and any((t.topic, t.partition) not in positions for t in found.tasks):
                self.found_new()
            self._picked_up.wait()

    def close(self, timeout: float | None = None) -> bool:
        """End the rounds. True once a round under way has ended; False when it is still under way after `timeout`
        seconds (a round waiting out retries on a lost cluster): the clients it uses must then stay open, and the
        thread, a daemon, ends with the process."""
        self._closed.set()
        self._picked_up.set()
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()


@dataclass
class Epoch:
    """One copy job: its results, how many ranges it copied (0: nothing to copy) and how long it took."""

    results: list[CopyResult]
    ranges: int
    seconds: float
    rounds: list[CopyRound] = field(default_factory=list)  # discovery rounds applied before it


class CopyEpochs:
    """The epochs of one flow run. Bounded (no `discovery`): an epoch copies a round's ranges to their ends.
    Continuous: every epoch reopens the ranges where the last one stopped, with what discovery found applied.
    Before each job the driver's claim must still hold; a job whose writers an older replicator (not yet aware of
    the claim) fenced back is run again, the tasks taking over from the destination, up to FENCED_RETRIES times."""

    def __init__(
        self,
        flow: str,
        target: str,
        first: CopyRound,
        claim: Claim,
        run_job: RunJob,
        parallelism: int,
        discovery: Discovery | None = None,
    ) -> None:
        self.flow, self.target = flow, target
        self.round, self.claim, self.run_job, self.parallelism = first, claim, run_job, parallelism
        self.discovery = discovery
        self.positions = Positions(first)
        self.count = 0

    def next(self, fresh: CopyRound | None = None) -> Epoch:
        """The next epoch. `fresh`, bounded: copy this round instead, decided since the last epoch (what arrived
        meanwhile)."""
        if fresh is not None:
            self.round = fresh
        return self._run(self._work)

    def finish(self, until: Mapping[Key, int]) -> Epoch:
        """After a stop: one more epoch, copying each partition of `until` from where it stands up to that offset
        (exclusive) and no other: bounded, so it ends once they are copied (a heartbeat written as the last
        epoch ended)."""

        def work(rounds: list[CopyRound]) -> list[CopyTask]:
            return [
                dataclasses.replace(t, end=until[key])
                for t in self.positions.open_tasks(self.round)
                if until.get(key := (t.topic, t.partition), t.start) > t.start
            ]

        return self._run(work)

    def _run(self, make_work: Callable[[list[CopyRound]], list[CopyTask]]) -> Epoch:
        rounds: list[CopyRound] = []
        fenced_retries = 0
        while True:
            work = make_work(rounds)
            started = time.monotonic()
            # At most one task per core: a task copies its group of ranges with one consumer, and owns the
            # writer slots of its ranges.
            groups = writer_groups(work, self.parallelism)
            if not self.claim.holds():
                raise FencedError(
                    f"flow {self.flow}: fenced out of {self.target} by a newer replicator of this flow; this one stops"
                )
            try:
                results = self.run_job(groups) if work else []
            except Exception as exc:
                if "FencedError: " not in str(exc) or fenced_retries == FENCED_RETRIES or not self.claim.holds():
                    raise
                fenced_retries += 1
                log.warning("flow %s: an older replicator of this flow was still writing; fencing it out", self.flow)
                continue
            epoch = Epoch(results, len(work), time.monotonic() - started, rounds)
            self.count += 1
            self.positions.update(results)
            if work:
                log.info(
                    "flow %s: %s %d copied %d records (%d filtered) across %d partitions in %.2fs (tasks "
                    "copying %.2fs)",
                    self.flow,
                    "batch" if self.discovery is None else "epoch",
                    self.count,
                    sum(r.records for r in results),
                    sum(r.filtered for r in results),
                    epoch.ranges,
                    epoch.seconds,
                    max(r.seconds for r in results),
                )
            return epoch

    def _work(self, rounds: list[CopyRound]) -> list[CopyTask]:
        if self.discovery is None:
            return [t for t in self.round.tasks if t.end is not None and t.end > t.start]
        found = self.discovery.poll(self.positions.next)
        if found is not None:
            self.round = self.positions.merge(found)
            rounds.append(found)
        return self.positions.open_tasks(self.round)
