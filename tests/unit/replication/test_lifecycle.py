"""A replicator's lifecycle (replication/lifecycle.py) over fakes of its clients, claim and duties: what `start`
does and in which order, what an `epoch` copies, what `stop` releases and closes after a clean end, a stop request
or a failure, and a bounded run's copies until the source is quiet."""

from __future__ import annotations

import functools
import re
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from kafka_dr.replication import lifecycle
from kafka_dr.replication.control import StopRequest
from kafka_dr.replication.copier import CopyResult, CopyTask
from kafka_dr.replication.flow_clients import UnreachableError
from kafka_dr.replication.lifecycle import Replicator, ReplicatorSettings
from kafka_dr.replication.rounds import CopyRound
from kafka_dr.topology import Cluster, Flow, TopicFilter

FLOW = Flow("dc1-to-dc2", "dc1", "dc2", TopicFilter((re.compile(".*"),)))
HEARTBEATS = "_kdr.heartbeats"


def task(partition: int, start: int, end: int | None, topic: str = "orders") -> CopyTask:
    return CopyTask(FLOW.name, {}, {}, "dc1", "dc2", "src", "dst", topic, partition, topic, start, end)


class Clients:
    def __init__(self, fakes: Fakes, topology: Any, flow: Flow, retries: int) -> None:
        self.fakes, self.source, self.retries = fakes, Cluster("dc1", "dc1:9092"), retries
        self.source_config, self.target_config = {"bootstrap.servers": "dc1:9092"}, {"bootstrap.servers": "dc2:9092"}

    def open(self) -> Clients:
        self.fakes.events.append("open clients")
        return self

    def close(self) -> None:
        self.fakes.events.append("close clients")


class Rounds:
    def __init__(self, fakes: Fakes, clients: Clients, force: Any) -> None:
        self.fakes = fakes

    def prepare_target(self) -> None:
        self.fakes.events.append("prepare target")

    def next(self, positions: Any = None) -> CopyRound:
        self.fakes.events.append("round")
        rounds = self.fakes.rounds
        return rounds.pop(0) if len(rounds) > 1 else rounds[0]


class Claim:
    def __init__(self, fakes: Fakes, flow: str, config: dict, owner: dict) -> None:
        self.fakes = fakes
        fakes.events.append("claim")

    def holds(self) -> bool:
        return True

    def release(self, reason: str, request: str | None = None) -> None:
        self.fakes.events.append(f"release: {reason} (request {request})")


class Requests:
    def __init__(self, fakes: Fakes, flow: str, clusters: list, stop: threading.Event, obey: Any) -> None:
        self.fakes, self.obey = fakes, obey
        fakes.events.append("watch stop requests")
        fakes.requests = self

    def start(self) -> None:
        self.fakes.events.append("stop requests read")


class Heartbeats:
    def __init__(self, fakes: Fakes, config: dict, flow: str, interval: float, stop: threading.Event) -> None:
        self.fakes = fakes

    def start(self) -> None:
        self.fakes.events.append("heartbeats")

    def uncopied(self, positions: dict) -> dict:
        return self.fakes.uncopied


class Ends:
    host, port = "127.0.0.1", 4242

    def __init__(self, fakes: Fakes, host: str) -> None:
        self.fakes = fakes
        fakes.events.append("epoch ends")

    def ticket(self) -> str:
        return "ticket"

    def end_current(self) -> None:
        pass

    def end_all(self) -> None:
        pass

    def close(self) -> None:
        self.fakes.events.append("close epoch ends")


class SourceGroup:
    """The source consumer that commits the flow's group."""

    def __init__(self, fakes: Fakes, config: dict) -> None:
        self.fakes = fakes

    def commit(self, offsets: list, asynchronous: bool) -> None:
        self.fakes.committed.append([(tp.topic, tp.partition, tp.offset) for tp in offsets])

    def close(self) -> None:
        pass


class Fakes:
    """The replicator's collaborators, each noting what it was asked in `events`, in order; also its copy runner
    and its checkpoints."""

    parallelism, driver_host = 2, "127.0.0.1"

    def __init__(self, monkeypatch: pytest.MonkeyPatch, rounds: list[CopyRound]) -> None:
        self.events: list[str] = []
        self.rounds = rounds  # the rounds decided, in turn; the last one again once they run out
        self.requests: Requests | None = None
        self.uncopied: dict[tuple[str, int], int] = {}  # what the heartbeats say is left to copy at the stop
        self.committed: list[list[tuple[str, int, int]]] = []
        self.answers = True  # whether the source answers the stop's probe
        for name, fake in (
            ("FlowClients", Clients),
            ("CopyRounds", Rounds),
            ("FlowClaim", Claim),
            ("StopRequests", Requests),
            ("HeartbeatTask", Heartbeats),
            ("EpochEnds", Ends),
            ("Consumer", SourceGroup),
        ):
            monkeypatch.setattr(lifecycle, name, functools.partial(fake, self))
        monkeypatch.setattr(lifecycle, "ClaimRenewal", lambda claim, stop, lost: SimpleNamespace(start=lambda: None))
        monkeypatch.setattr(lifecycle, "answers", lambda config, timeout: self.answers)

    def ready(self) -> None:
        self.events.append("runner ready")

    def run(self, groups: list[list[CopyTask]], ticket: str | None) -> list[CopyResult]:
        """Copies every range 10 records further, or to its end."""
        tasks = [t for group in groups for t in group]
        self.events.append(f"copy {len(tasks)} ranges" + (" (ticket)" if ticket else ""))
        return [
            CopyResult(t.topic, t.partition, t.dest_topic, t.start, end, records=end - t.start)
            for t in tasks
            for end in [t.start + 10 if t.end is None else t.end]
        ]

    def start(self) -> None:  # the checkpoints
        self.events.append("checkpoints")

    def last_pass(self) -> None:
        self.events.append("last checkpoint pass")


def replicator(fakes: Fakes, continuous: bool, stop: threading.Event | None = None) -> Replicator:
    settings = ReplicatorSettings(continuous, discover_interval=3600)
    return Replicator(None, FLOW, settings, fakes, fakes, stop or threading.Event())  # type: ignore[arg-type]


def test_a_bounded_run_connects_only_once_started_claims_after_the_target_is_prepared_and_releases_done(
    monkeypatch,
) -> None:
    fakes = Fakes(monkeypatch, [CopyRound([task(0, 0, 5), task(1, 7, 7)])])
    run = replicator(fakes, continuous=False)
    assert fakes.events == []  # constructing connects to nothing
    first = run.start()
    assert first.tasks[0].end == 5
    assert fakes.events == ["open clients", "prepare target", "claim", "round", "runner ready"]
    epoch = run.epoch()
    assert ([r.next for r in epoch.results], fakes.events[-1]) == ([5], "copy 1 ranges")  # no ticket: bounded
    assert run.stop() is None
    assert fakes.events[-2:] == ["release: done (request None)", "close clients"]
    assert fakes.committed == [[("orders", 1, 7)]]  # nothing left to copy there: the source group committed at start


def test_a_continuous_run_watches_stop_requests_before_its_claim_and_starts_its_duties(monkeypatch) -> None:
    fakes = Fakes(monkeypatch, [CopyRound([task(0, 3, 3)])])  # copied up to the source's end
    run = replicator(fakes, continuous=True)
    run.start()
    assert fakes.events == [
        "open clients",
        "prepare target",
        "watch stop requests",
        "claim",
        "round",
        "runner ready",
        "epoch ends",
        "stop requests read",
        "heartbeats",
        "checkpoints",
    ]
    assert fakes.committed == [[("orders", 0, 3)]]  # the source group, where a killed run may have left it behind
    epoch = run.epoch()
    assert fakes.events[-1] == "copy 1 ranges (ticket)" and [r.next for r in epoch.results] == [13]
    run.stop(RuntimeError("boom"))


def test_a_stop_request_ends_the_run_with_the_last_heartbeat_copied_a_last_checkpoint_and_the_request_named(
    monkeypatch,
) -> None:
    fakes = Fakes(monkeypatch, [CopyRound([task(0, 0, None, topic=HEARTBEATS), task(0, 0, None)])])
    run = replicator(fakes, continuous=True)
    run.start()
    run.epoch()  # every range 10 further
    assert fakes.requests is not None
    fakes.requests.obey(StopRequest(FLOW.name, "r-1", "host-b pid 7"))
    assert run.stopping
    fakes.uncopied = {(HEARTBEATS, 0): 12}
    last = run.stop()
    assert last is not None and [(r.topic, r.start, r.next) for r in last.results] == [(HEARTBEATS, 10, 12)]
    assert fakes.events[-5:] == [
        "copy 1 ranges",  # bounded: up to the last heartbeat, no ticket
        "last checkpoint pass",
        "release: stop request from host-b pid 7 (request r-1)",
        "close epoch ends",
        "close clients",
    ]


@pytest.mark.parametrize(
    ("request_lost", "answers"), [("dc1", True), (None, False)], ids=["the-request-says-so", "no-answer"]
)
def test_a_stopped_run_whose_source_is_lost_skips_the_last_heartbeat_and_checkpoint(
    monkeypatch, request_lost, answers
) -> None:
    fakes = Fakes(monkeypatch, [CopyRound([task(0, 0, None, topic=HEARTBEATS)])])
    fakes.answers, fakes.uncopied = answers, {(HEARTBEATS, 0): 12}
    stop = threading.Event()
    run = replicator(fakes, continuous=True, stop=stop)
    run.start()
    run.epoch()
    if request_lost:
        assert fakes.requests is not None
        fakes.requests.obey(StopRequest(FLOW.name, "r-2", "host-b pid 7", lost=request_lost))
    else:
        stop.set()  # SIGTERM
    assert run.stop() is None
    assert "last checkpoint pass" not in fakes.events
    assert fakes.events[-3].startswith("release: stop request from" if request_lost else "release: stopped")


def test_a_failed_start_releases_the_claim_as_failed_and_closes(monkeypatch) -> None:
    fakes = Fakes(monkeypatch, [CopyRound([])])

    def unreachable(positions: Any = None) -> CopyRound:
        raise UnreachableError("source cluster dc1 unreachable after 5 attempts: refused")

    run = replicator(fakes, continuous=False)
    monkeypatch.setattr(run._rounds, "next", unreachable)
    with pytest.raises(UnreachableError) as failed:
        run.start()
    run.stop(failed.value)
    assert fakes.events[-2:] == [
        "release: failed: source cluster dc1 unreachable after 5 attempts: refused (request None)",
        "close clients",
    ]


def test_a_replicator_copies_only_once_started(monkeypatch) -> None:
    run = replicator(Fakes(monkeypatch, [CopyRound([])]), continuous=False)
    with pytest.raises(RuntimeError, match="^flow dc1-to-dc2: the replicator copies only once started$"):
        run.epoch()


def test_until_quiet_copies_fresh_rounds_while_records_arrive_and_yields_only_the_epochs_that_copied(
    monkeypatch,
) -> None:
    monkeypatch.setattr(lifecycle, "QUIET_POLL_S", 0.0)
    arrived = CopyRound([task(0, 5, 8)])  # 3 records arrived after the first epoch
    quiet = CopyRound([task(0, 8, 8)])
    fakes = Fakes(monkeypatch, [CopyRound([task(0, 0, 5)]), arrived, quiet])
    run = replicator(fakes, continuous=False)
    run.start()
    run.epoch()
    epochs = list(run.until_quiet(0.05))
    assert [[(r.start, r.next) for r in e.results] for e in epochs] == [[(5, 8)]]
    assert fakes.events.count("round") > 3  # fresh rounds went on until nothing arrived for the quiet time
