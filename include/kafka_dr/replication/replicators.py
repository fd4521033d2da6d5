"""Continuous replicators as tracked background processes, so later DAGs can stop and restart them.

A continuous `replicate.py` job must outlive the Airflow task that started it, so its identity lives
on disk: STATE_DIR/replicators/<flow>.json holds the pid, command line, log path and start time.
A pid counts as the flow's only while /proc shows the same command line (spark-submit execs into
the JVM with the same arguments), so a recycled pid is never mistaken for a replicator. The
environment (which carries cluster secrets) is never written down. The state is per host: jobs are
local processes, so the state directory must not be shared between machines.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from ..state import locked, now_iso, subdir, write_json

KILL_GRACE = 5.0

_FLOW_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_START_MARK = "--- kafka-dr replicator starts at "
# Our own children, so that a finished one is reaped (not left a zombie) and is seen as ours before it execs.
_children: dict[int, subprocess.Popen[bytes]] = {}


class ReplicatorError(RuntimeError):
    """A replicator could not be started or stopped; one line naming the flow and why."""


@dataclass(frozen=True)
class Replicator:
    """What the tracker knows of one flow's replicator."""

    flow: str
    pid: int
    command: tuple[str, ...]
    log: str
    started_at: str
    stopped_at: str | None
    running: bool


def start(flow: str, command: Sequence[str], env: Mapping[str, str] | None = None) -> tuple[Replicator, bool]:
    """Start `command` detached for `flow` with `env` added to this process's environment.

    Returns (replicator, started): a flow whose replicator already runs is not started twice."""
    with _locked(flow):
        current = status(flow)
        if current is not None and current.running:
            return current, False
        log = _dir() / f"{flow}.log"
        with open(log, "ab") as out:
            out.write(f"{_START_MARK}{now_iso()}: {shlex.join(command)}\n".encode())
            out.flush()
            try:
                proc = subprocess.Popen(
                    list(command),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, **(env or {})},
                    start_new_session=True,  # its own process group, detached from the task's signals
                )
            except OSError as exc:
                raise ReplicatorError(f"flow {flow}: cannot start {command[0]!r}: {exc.strerror or exc}") from None
        _children[proc.pid] = proc
        replicator = Replicator(flow, proc.pid, tuple(command), str(log), now_iso(), None, True)
        _write(replicator)
        return replicator, True


def stop(flow: str, timeout: float = 30.0) -> Replicator | None:
    """Stop the flow's replicator: SIGTERM to the job itself (it finishes its batch and exits 0), then to
    its whole process group, SIGKILL after `timeout` seconds. Returns the final state, None if never started."""
    with _locked(flow):
        current = status(flow)
        if current is None:
            return None
        if current.running:
            driver = _driver_pid(current)
            if driver is not None:
                _signal(driver, signal.SIGTERM)  # the JVM exits with the driver's exit code
            else:
                _signal_group(current.pid, signal.SIGTERM)
            if not _wait_gone(current, timeout):
                _signal_group(current.pid, signal.SIGKILL)
                if not _wait_gone(current, KILL_GRACE):
                    raise ReplicatorError(f"flow {flow}: replicator pid {current.pid} did not stop")
        stopped = Replicator(**{**asdict(current), "stopped_at": current.stopped_at or now_iso(), "running": False})
        _write(stopped)
        return stopped


def status(flow: str) -> Replicator | None:
    """The flow's replicator as last started (running or not), None if it never was."""
    path = _state_file(flow)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        data["command"] = tuple(data["command"])
        data["running"] = data["stopped_at"] is None and _is_ours(data["pid"], data["command"])
        return Replicator(**data)
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        raise ReplicatorError(f"{path}: not a replicator state file ({exc})") from None


def is_running(flow: str) -> bool:
    current = status(flow)
    return current is not None and current.running


def last_error(flow: str) -> str:
    """The line that best explains why the replicator stopped: the job's own "error:" line from its latest
    run, else that run's last log line."""
    current = status(flow)
    try:
        text = Path(current.log).read_text(errors="replace") if current else ""
    except FileNotFoundError:
        text = ""
    lines = [line.strip() for line in text.rpartition(_START_MARK)[2].splitlines()[1:] if line.strip()]
    errors = [line for line in lines if "error:" in line]
    return (errors or lines or ["no output"])[-1]


def _dir() -> Path:
    return subdir("replicators")


def _state_file(flow: str) -> Path:
    if not _FLOW_RE.fullmatch(flow):
        raise ReplicatorError(f"bad flow name {flow!r}")
    return _dir() / f"{flow}.json"


def _write(replicator: Replicator) -> None:
    write_json(_state_file(replicator.flow), asdict(replicator))


def _locked(flow: str) -> contextlib.AbstractContextManager[None]:
    """One start or stop of a flow at a time, across processes (parallel tasks, two DAG runs)."""
    return locked(_state_file(flow))


def _cmdline(pid: int) -> list[str]:
    """A live process's argv; empty when gone, a zombie, or not ours to read."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return raw.rstrip(b"\0").decode(errors="replace").split("\0") if raw else []


def _is_ours(pid: int, command: Sequence[str]) -> bool:
    child = _children.get(pid)
    if child is not None:
        if child.poll() is None:
            return True  # our own child; before it execs, /proc still shows our command line
        del _children[pid]
        return False
    tail = list(command[1:] or command)
    args = _cmdline(pid)
    return bool(args) and args[-len(tail):] == tail


def _driver_pid(replicator: Replicator) -> int | None:
    """The process running the application itself, in the replicator's process group: with spark-submit in
    client mode the Python driver, started by the JVM as `python APP ARGS...` (a tail of our command)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == replicator.pid:
            continue
        try:
            pgid = os.getpgid(int(entry.name))
        except OSError:
            continue
        args = _cmdline(int(entry.name))
        if pgid == replicator.pid and len(args) > 2 and list(replicator.command[-(len(args) - 1):]) == args[1:]:
            return int(entry.name)
    return None


def _wait_gone(replicator: Replicator, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _is_ours(replicator.pid, replicator.command):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)
