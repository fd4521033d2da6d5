"""The one supervisor of kafka-dr's detached background processes (the local stack's servers, the replicators).

Their identity, starting, signals, waiting for exit, log tails, and the locked, atomically written files that
record them, so that any later process (another CLI call, another Airflow task) can find and stop them.

A pid alone is not an identity (pids are recycled) and a command line is not either (spark-submit
execs into a JVM that reorders its options). The pair (pid, start time in clock ticks since boot)
is: it survives exec and is never reused for another process while the machine runs. It is read from
/proc, so any process can ask.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple


class ProcInfo(NamedTuple):
    ppid: int
    ticks: int  # start time, clock ticks since boot


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat from field 3 (state) on; the command name may hold spaces and parentheses."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2 :].split()


def _info(pid: int) -> ProcInfo | None:
    fields = _stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):  # a zombie has finished all it will ever do
        return None
    return ProcInfo(int(fields[1]), int(fields[19]))


def start_ticks(pid: int) -> int | None:
    """When the live process `pid` started; None when it is gone or a zombie."""
    info = _info(pid)
    return None if info is None else info.ticks


def is_alive(pid: int, ticks: int | None) -> bool:
    """The process `pid` still runs and is the one that started at `ticks` (not a recycled pid)."""
    return ticks is not None and start_ticks(pid) == ticks


def pid_namespace() -> str:
    """This process's PID namespace ("pid:[4026531836]"): a pid recorded in another one names another process, or
    none, under this one's /proc (a container, `unshare --pid`)."""
    return os.readlink("/proc/self/ns/pid")


def tree(pid: int) -> dict[int, int]:
    """`pid` and every live descendant, with their start ticks. Descendants matter because a child
    may leave its parent's process group (PySpark's worker daemon makes a group of its own)."""
    live = {int(e.name): info for e in Path("/proc").iterdir() if e.name.isdigit() and (info := _info(int(e.name)))}
    found = {pid: live[pid].ticks} if pid in live else {}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, info in live.items():
            if info.ppid == parent and child not in found:
                found[child] = info.ticks
                frontier.append(child)
    return found


def cmdline(pid: int) -> list[str]:
    """A live process's argv; empty when gone, a zombie, or not ours to read."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return raw.rstrip(b"\0").decode(errors="replace").split("\0") if raw else []


def send(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def send_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def wait_gone(procs: dict[int, int], timeout: float, interval: float = 0.1) -> dict[int, int]:
    """Wait up to `timeout` seconds for the processes {pid: ticks} to end; returns those still alive."""
    deadline = time.monotonic() + timeout
    while True:
        procs = {pid: ticks for pid, ticks in procs.items() if is_alive(pid, ticks)}
        if not procs or time.monotonic() >= deadline:
            return procs
        time.sleep(interval)


def end_groups(procs: dict[int, int], grace: float) -> dict[int, int]:
    """SIGTERM to the process groups led by {pid: ticks}, SIGKILL to those left after `grace` seconds; returns
    those still alive `grace` seconds later (each leader runs in its own session: pgid == pid)."""
    for pid in procs:
        send_group(pid, signal.SIGTERM)
    left = wait_gone(procs, grace)
    for pid in left:
        send_group(pid, signal.SIGKILL)
    return wait_gone(left, grace)


def kill_groups(procs: dict[int, int], timeout: float) -> dict[int, int]:
    """SIGKILL to the process groups led by {pid: ticks} (a crash: nothing runs a shutdown hook); returns those
    still alive `timeout` seconds later."""
    for pid in procs:
        send_group(pid, signal.SIGKILL)
    return wait_gone(procs, timeout)


def spawn(
    command: Sequence[str], log: Path, mark: str, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start `command` detached, its output appended to `log` after a line `mark<time>: <command>` (which
    `latest_run` finds again). Its own session, so it outlives its starter and the terminal's signals, and one
    signal to its group reaches all it started. `env` is added to this process's environment."""
    with open(log, "ab") as out:
        out.write(f"{mark}{datetime.now(UTC).isoformat(timespec='seconds')}: {shlex.join(command)}\n".encode())
        out.flush()
        return subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )


def latest_run(log: Path, mark: str) -> list[str] | None:
    """The non-blank lines the latest start wrote to `log` (after the last `mark` line `spawn` wrote), where
    the reason a process died usually is; None when there is no log."""
    try:
        _, found, output = log.read_text(errors="replace").rpartition(mark)
    except FileNotFoundError:
        return None
    return [line.strip() for line in output.splitlines()[1 if found else 0 :] if line.strip()]


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Exclusive across processes for as long as the block runs (a `.lock` file beside `path`): whoever reads,
    changes and writes `path` holds it, so parallel commands and tasks never act on a stale read."""
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def write_atomic(path: Path, text: str) -> None:
    """Write, then rename: a reader sees the old file or the new one, never half of one."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2) + "\n")
