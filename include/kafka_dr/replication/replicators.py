"""Continuous replicators as tracked background processes, so later DAGs can stop and restart them.

A continuous `replicate.py` job must outlive the Airflow task that started it, so its identity lives
on disk: STATE_DIR/replicators/<flow>.json holds the pid and its start time in clock ticks, the host and
PID namespace it was started in, the command line, log path and start time. A process of the same host
and PID namespace answers liveness the same way: the pid runs and started at those ticks
(`kafka_dr.processes`), which survives spark-submit's exec into the JVM and never matches a recycled
pid. Anywhere else (another container, another Celery worker's namespace, another host) the pid means
nothing, and liveness.py asks the flow's target cluster instead. The environment (which carries
cluster secrets) is never written down. Across hosts, the copier's transactional writers fence an
older replicator of the same flow (see `replication.fencing`), so two never write at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import signal
import socket
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import processes
from ..state import now_iso, subdir

KILL_GRACE = 5.0

_FLOW_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_START_MARK = "--- kafka-dr replicator starts at "
# Our own children, so that a finished one is reaped rather than left a zombie.
_children: dict[int, subprocess.Popen[bytes]] = {}


class ReplicatorError(RuntimeError):
    """A replicator could not be started or stopped; one line naming the flow and why."""


@dataclass(frozen=True)
class ReplicatorProcess:
    """What the tracker knows of one flow's replicator process (the run inside it: lifecycle.Replicator)."""

    flow: str
    pid: int
    command: tuple[str, ...]
    log: str
    started_at: str
    stopped_at: str | None
    running: bool
    start_ticks: int | None = None  # the pid's start time (clock ticks since boot): its identity
    host: str | None = None  # where it was started (None: a record from before hosts were recorded, this host)
    pid_namespace: str | None = None  # ... and in which PID namespace: where `pid` names it

    @property
    def here(self) -> bool:
        """Started on this host in this PID namespace: its pid, and so `running`, mean something here."""
        return self.host in (None, socket.gethostname()) and self.pid_namespace in (None, processes.pid_namespace())


def start(flow: str, command: Sequence[str], env: Mapping[str, str] | None = None) -> tuple[ReplicatorProcess, bool]:
    """Start `command` detached for `flow` with `env` added to this process's environment.

    Returns (replicator, started): a flow whose replicator already runs is not started twice."""
    with _locked(flow):
        current = status(flow)
        if current is not None and current.running:
            return current, False
        log = _dir() / f"{flow}.log"
        try:
            proc = processes.spawn(command, log, _START_MARK, env)  # detached from the task's signals
        except OSError as exc:
            raise ReplicatorError(f"flow {flow}: cannot start {command[0]!r}: {exc.strerror or exc}") from None
        _children[proc.pid] = proc
        ticks = processes.start_ticks(proc.pid)
        replicator = ReplicatorProcess(
            flow, proc.pid, tuple(command), str(log), now_iso(), None, ticks is not None, ticks,
            socket.gethostname(), processes.pid_namespace(),
        )  # fmt: skip
        _write(replicator)
        return replicator, True


def stop(flow: str, timeout: float = 30.0) -> ReplicatorProcess | None:
    """Stop the flow's replicator: SIGTERM to the job itself (it ends its epoch at each task's next batch and
    exits 0), SIGKILL to what is left after `timeout` seconds. Returns once no process of the job is alive, so
    nothing of it copies any more (its Python workers included); raises ReplicatorError naming the pid otherwise.
    Returns the final state, None if never started. Only for a replicator started `here`: any other is stopped
    through its target (liveness.stop), and this raises ReplicatorError."""
    with _locked(flow):
        current = status(flow)
        if current is None:
            return None
        if not current.here:
            raise ReplicatorError(
                f"flow {flow}: its replicator was started on {current.host} in {current.pid_namespace}, not here: "
                "stop it through its target cluster"
            )
        if current.running:
            job = processes.tree(current.pid)  # the JVM, the Python driver, PySpark's daemon and its workers
            driver = _driver_pid(current, job)
            if driver is not None:
                processes.send(driver, signal.SIGTERM)  # the JVM exits with the driver's exit code
            else:
                processes.send_group(current.pid, signal.SIGTERM)
            left = processes.wait_gone(job, timeout)
            if left:
                for pid in left:
                    processes.send(pid, signal.SIGKILL)
                left = processes.wait_gone(left, KILL_GRACE)
            _reap(current.pid)
            if left:
                raise ReplicatorError(
                    f"flow {flow}: replicator pid {current.pid} did not stop "
                    f"(pids {', '.join(map(str, sorted(left)))} still alive)"
                )
        return _mark_stopped(current)


def mark_stopped(flow: str) -> ReplicatorProcess | None:
    """Record that the flow's replicator was stopped on purpose (through its target, from wherever it ran), so
    that nothing here restarts it or calls it dead; None if it was never started here."""
    with _locked(flow):
        current = status(flow)
        return None if current is None else _mark_stopped(current)


def _mark_stopped(current: ReplicatorProcess) -> ReplicatorProcess:
    stopped = ReplicatorProcess(**{**asdict(current), "stopped_at": current.stopped_at or now_iso(), "running": False})
    _write(stopped)
    return stopped


def status(flow: str) -> ReplicatorProcess | None:
    """The flow's replicator as last started (running or not), None if it never was. `running` is what this
    process can see: always False for one not started `here` (liveness.py asks its target)."""
    path = _state_file(flow)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        data["command"] = tuple(data["command"])
        data["running"] = False
        replicator = ReplicatorProcess(**data)
        if replicator.here:
            _reap(replicator.pid)
            alive = replicator.stopped_at is None and processes.is_alive(replicator.pid, replicator.start_ticks)
            replicator = dataclasses.replace(replicator, running=alive)
        return replicator
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        raise ReplicatorError(f"{path}: not a replicator state file ({exc})") from None


def tracked() -> list[str]:
    """The flows whose replicator was ever started here (running or not)."""
    return sorted(path.stem for path in _dir().glob("*.json") if not path.name.endswith(".summary.json"))


def is_running(flow: str) -> bool:
    current = status(flow)
    return current is not None and current.running


def last_error(flow: str) -> str:
    """The line that best explains why the replicator stopped: the job's own "error:" line from its latest
    run, else that run's last log line."""
    current = status(flow)
    lines = (processes.latest_run(Path(current.log), _START_MARK) if current else None) or []
    errors = [line for line in lines if "error:" in line]
    return (errors or lines or ["no output"])[-1]


def _dir() -> Path:
    return subdir("replicators")


def _state_file(flow: str) -> Path:
    if not _FLOW_RE.fullmatch(flow):
        raise ReplicatorError(f"bad flow name {flow!r}")
    return _dir() / f"{flow}.json"


def _write(replicator: ReplicatorProcess) -> None:
    processes.write_json(_state_file(replicator.flow), asdict(replicator))


def _locked(flow: str) -> contextlib.AbstractContextManager[None]:
    """One start or stop of a flow at a time, across processes (parallel tasks, two DAG runs)."""
    return processes.locked(_state_file(flow))


def _reap(pid: int) -> None:
    """Collect our own finished child, which would otherwise stay a zombie of this process."""
    child = _children.get(pid)
    if child is not None and child.poll() is not None:
        del _children[pid]


def _driver_pid(replicator: ReplicatorProcess, job: Mapping[int, int]) -> int | None:
    """The process running the application itself: with spark-submit in client mode the Python driver,
    started by the JVM as `python APP ARGS...` (a tail of our command)."""
    for pid in job:
        args = processes.cmdline(pid)
        if pid != replicator.pid and len(args) > 2 and list(replicator.command[-(len(args) - 1) :]) == args[1:]:
            return pid
    return None
