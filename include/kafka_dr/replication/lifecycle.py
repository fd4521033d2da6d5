"""One flow's replicator as an object with a lifecycle, as MirrorMaker 2's MirrorSourceTask: `start`, `epoch`, `stop`.

start: open the flow's clients, make the target's internal topics, claim the flow (which fences any older replicator
of it, wherever it runs: fencing.py) and decide the first copy round; a continuous run then starts its duties beside
the copies (heartbeats, group-offset checkpoints, the claim's renewal, the stop requests' watch). epoch: one copy
epoch (epochs.py), each task's copies committed with their progress. stop: after a clean stop of a continuous run, the
last heartbeat's copy and a last checkpoint pass; then the claim released, saying why the run ended, and the clients
closed. Where the copy tasks run is handed in (`CopyRunner`: the job's Spark context), so no Spark is imported here;
so are the checkpoints, whose translation package sits above this one.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka import Consumer, TopicPartition

from ..access import ClusterAccess
from ..clients import answers
from ..topology import Flow
from .control import StopRequest, StopRequests
from .copier import CopyResult, CopyTask
from .epoch_end import EpochEnds, EpochTicket
from .epochs import CopyEpochs, Discovery, Epoch
from .fencing import ClaimRenewal, FlowClaim
from .flow_clients import FlowClients, with_retries
from .heartbeat import HeartbeatTask
from .provenance import ForceCopy
from .rounds import CopyRound, CopyRounds

log = logging.getLogger(__name__)

QUIET_CAP_S = 60.0  # --until-quiet: the longest the copying goes on while records keep arriving
QUIET_POLL_S = 0.5  # --until-quiet: how often the source's ends are read again
IDLE_WAIT_S = 1.0  # continuous: the pause after an epoch that had nothing to copy (a flow of no partition yet)
SOURCE_PROBE_S = 2.0  # continuous, stopped: how long the source may take to answer before it counts as lost
DISCOVERY_CLOSE_S = 1.0  # a stopped run leaves a discovery round that waits on a lost cluster after this long


@dataclass(frozen=True)
class ReplicatorSettings:
    """How a replicator runs: bounded (copy up to the ends at the start) or continuous, and its duties' cadence."""

    continuous: bool
    retries: int = 5  # attempts to reach a cluster
    force: ForceCopy | None = None  # copies the cycle rule would block, forced
    discover_interval: float = 10.0  # continuous: seconds between discovery rounds
    heartbeat_interval: float = 1.0  # continuous: seconds between heartbeats


class CopyRunner(Protocol):
    """Where an epoch's copy tasks run (the job's Spark context), which may come up while the first round is
    decided: `ready()` waits for it; `parallelism` and `driver_host` (where the tasks reach the driver) hold after."""

    parallelism: int
    driver_host: str

    def ready(self) -> None: ...

    def run(self, groups: list[list[CopyTask]], ticket: EpochTicket | None) -> list[CopyResult]: ...


class Checkpoints(Protocol):
    """The flow's group-offset checkpoints in its target (translation.checkpoints.CheckpointTask)."""

    def start(self) -> None: ...

    def last_pass(self) -> None: ...


class Replicator:
    """One run of a flow's replicator: `start()`, then `epoch()` until the run is done (bounded: once, then
    `until_quiet` if asked) or `stopping` (continuous: the `stop` event, set by SIGTERM or a stop request), then
    `stop()`, also when anything failed. Constructing it connects to nothing."""

    def __init__(
        self,
        access: ClusterAccess,
        flow: Flow,
        settings: ReplicatorSettings,
        runner: CopyRunner,
        checkpoints: Checkpoints,
        stop: threading.Event,
    ) -> None:
        self.flow, self.settings, self._stop = flow, settings, stop
        self._runner, self._checkpoints = runner, checkpoints
        self._clients = FlowClients(access, flow, retries=settings.retries)
        self._rounds = CopyRounds(self._clients, force=settings.force)
        self._heartbeats = HeartbeatTask(self._clients.source_config, flow.name, settings.heartbeat_interval, stop)
        self._probe = SourceProbe(self._clients.source_config)
        self._started_at = time.time()
        self._renewing = threading.Event()  # set once the claim is released: owner records go on until then
        self._claim: FlowClaim | None = None
        self._obeyed: StopRequest | None = None  # the stop request that ended the run, if one did
        self._ends: EpochEnds | None = None  # continuous: how the driver ends an epoch before its deadline
        self._discovery: Discovery | None = None
        self._epochs: CopyEpochs | None = None

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def start(self) -> CopyRound:
        """Open the clients, claim the flow and decide the first round (returned); a continuous run's duties start."""
        self._clients.open()
        self._rounds.prepare_target()  # the internal topics, before the stop requests' watch and the claim use them
        requests = self._watch_stop_requests() if self.settings.continuous else None
        claim = self._claim = FlowClaim(
            self.flow.name,
            self._clients.target_config,
            {"host": socket.gethostname(), "pid": os.getpid(), "started_at": self._started_at},
        )
        first = self._rounds.next()
        self._runner.ready()  # its start-up was hidden behind the driver's start, as far as that went
        if requests is not None:
            self._start_duties(requests, claim)
        self._epochs = CopyEpochs(
            self.flow.name, self.flow.target, first, claim, self._run_job, self._runner.parallelism, self._discovery
        )
        self._commit_copied(first)
        return first

    def epoch(self) -> Epoch:
        """One copy epoch. A continuous one that had nothing to copy pauses IDLE_WAIT_S (unless stopping)."""
        epoch = self._started().next()
        if self.settings.continuous and not epoch.ranges:
            self._stop.wait(IDLE_WAIT_S)
        return epoch

    def until_quiet(self, quiet: float) -> Iterator[Epoch]:
        """Bounded, after its epoch: epochs of fresh rounds (each resumes from what the destination holds) while the
        source's ends keep moving, until `quiet` seconds pass with nothing to copy, or QUIET_CAP_S. Yields the
        epochs that copied something."""
        started = last_copy = time.monotonic()
        while time.monotonic() - last_copy < quiet and time.monotonic() - started < QUIET_CAP_S:
            time.sleep(QUIET_POLL_S)
            epoch = self._started().next(self._rounds.next())
            if epoch.ranges:
                copied = sum(r.records for r in epoch.results)
                log.info("flow %s: %d more records arrived; copied", self.flow.name, copied)
                yield epoch
                last_copy = time.monotonic()

    def stop(self, error: BaseException | None = None) -> Epoch | None:
        """End the run. A clean stop of a continuous run first does its last duties (returns the epoch that copied
        the last heartbeat, if one was needed). Then, whatever happened: the claim released, naming why the run
        ended (`error`: it failed), and the clients closed."""
        last = None
        try:
            if error is None and self.settings.continuous:
                last = self._last_duties()
        except BaseException as exc:
            error = exc
            raise
        finally:
            self._release(error)
            self._close()
        return last

    def _started(self) -> CopyEpochs:
        if self._epochs is None:
            raise RuntimeError(f"flow {self.flow.name}: the replicator copies only once started")
        return self._epochs

    def _run_job(self, groups: list[list[CopyTask]]) -> list[CopyResult]:
        """An epoch's writer groups, run by the runner; open ranges get a ticket to hear of the epoch's early end."""
        open_ranges = any(t.end is None for group in groups for t in group)
        ticket = self._ends.ticket() if self._ends is not None and open_ranges else None
        return self._runner.run(groups, ticket)

    def _watch_stop_requests(self) -> StopRequests:
        """Made before the claim, so that a stop request made once it is claimed is always read; the source too: a
        stop while the target is lost."""
        clusters = [self._clients.target_config, self._clients.source_config]
        return StopRequests(self.flow.name, clusters, self._stop, obey=self._obey)

    def _obey(self, request: StopRequest) -> None:
        """A stop request read in the target ends the run as SIGTERM does; the last owner record names it."""
        self._obeyed = request
        self._stop.set()

    def _start_duties(self, requests: StopRequests, claim: FlowClaim) -> None:
        """A continuous run's duties beside the copies: the driver's word that ends an epoch early (a stop ends the
        one under way; so does a discovery round that finds new partitions); an owner record every second whatever
        the epoch's length, until the last one (a claim lost to a newer replicator ends the epoch, and the next
        epoch's check stops this run); the stop requests' watch; heartbeats; checkpoints."""
        ends = self._ends = EpochEnds(self._runner.driver_host)
        log.info("flow %s: its tasks hear of an epoch's early end on %s:%d", self.flow.name, ends.host, ends.port)
        self._discovery = Discovery(self._rounds.next, self.settings.discover_interval, ends.end_current)
        threading.Thread(target=self._end_epochs_at_stop, args=(ends,), name="kdr-stop", daemon=True).start()
        ClaimRenewal(claim, self._renewing, lost=ends.end_all).start()
        requests.start()
        self._heartbeats.start()
        self._checkpoints.start()

    def _end_epochs_at_stop(self, ends: EpochEnds) -> None:
        """A stop ends the epoch under way (and any other but the bounded one that copies the last heartbeat), and
        asks whether the source still answers meanwhile."""
        self._stop.wait()
        log.info("stopping: the epoch under way ends at each task's next batch")
        ends.end_all()
        self._probe.start()

    def _commit_copied(self, first: CopyRound) -> int:
        """Commit the flow's consumer group on the source (what lag tools and the lag gates read) at the start of
        each of the first round's ranges that will not commit it by copying: an open range (a continuous run commits
        as records come) and a bounded one with nothing left to copy. Copy tasks commit what they copy, but a run
        killed after its last copy and before its commit left the group behind, and the run resumed after it may
        copy nothing. Returns the partitions committed."""
        copied = [
            TopicPartition(t.topic, t.partition, t.start)
            for t in first.tasks
            if t.start > 0 and (t.end is None or t.end <= t.start)
        ]
        if copied:
            clients = self._clients
            consumer = Consumer({**clients.source_config, "group.id": self.flow.name, "enable.auto.commit": False})
            try:
                commit = lambda: consumer.commit(offsets=copied, asynchronous=False)  # noqa: E731
                with_retries(f"source cluster {clients.source.name}", commit, clients.retries)
            finally:
                consumer.close()
        return len(copied)

    def _last_duties(self) -> Epoch | None:
        """A stopped continuous run copies a heartbeat written as its last epoch ended and makes a last checkpoint
        pass; not when its source is lost (a disaster's stop request says so, or the source did not answer a
        probe): both would wait out their timeouts on it, and a disaster's stop of a replicator started here kills
        it after 5 s."""
        obeyed = self._obeyed
        if (obeyed is not None and obeyed.lost == self.flow.source) or not self._probe.answers():
            log.info(
                "flow %s: its source %s is lost: no last heartbeat copy or checkpoint pass",
                self.flow.name,
                self.flow.source,
            )
            return None
        epochs = self._started()
        last_heartbeat = self._heartbeats.uncopied(epochs.positions.next)
        last = None
        if last_heartbeat:
            log.info("flow %s: its last heartbeat came as the epoch ended; copying it", self.flow.name)
            last = epochs.finish(last_heartbeat)
        self._checkpoints.last_pass()
        return last

    def _release(self, error: BaseException | None) -> None:
        """The last owner record: why the run ended, and the stop request it obeyed."""
        self._stop.set()
        self._renewing.set()
        if self._claim is None:
            return
        obeyed = self._obeyed
        if error is not None:
            ended = f"failed: {error}"
        elif not self.settings.continuous:
            ended = "done"
        else:
            ended = f"stop request from {obeyed.by}" if obeyed is not None else "stopped"
        self._claim.release(ended, request=obeyed.id if obeyed is not None else None)

    def _close(self) -> None:
        if self._ends is not None:
            self._ends.close()
        # A discovery round still waiting on a lost cluster keeps its clients open until the process ends.
        if self._discovery is None or self._discovery.close(DISCOVERY_CLOSE_S):
            self._clients.close()


class SourceProbe:
    """Whether the flow's source still answers (a stop by SIGTERM does not say whether a disaster lost it): asked
    once, as the stop comes, beside the end of the epoch under way rather than after it."""

    def __init__(self, config: dict[str, Any]) -> None:
        self._config = config
        self._lock = threading.Lock()
        self._answer: Future[bool] | None = None

    def start(self) -> Future[bool]:
        with self._lock:
            if self._answer is None:
                self._answer = Future()
                threading.Thread(target=self._ask, name="kdr-source-probe", daemon=True).start()
            return self._answer

    def answers(self) -> bool:
        return self.start().result()

    def _ask(self) -> None:
        assert self._answer is not None
        try:
            self._answer.set_result(answers(self._config, SOURCE_PROBE_S))
        except Exception:  # noqa: BLE001 - a failure to ask means it does not answer
            self._answer.set_result(False)
