"""CPU-seconds of processes, read from /proc: what a benchmark charges to one tool (a process and everything it
starts) or to a server it runs beside."""

from __future__ import annotations

import os
import threading
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU-seconds so far) of `pid`, None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after the command, which may hold spaces
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICKS


def cpu_seconds(pid: int) -> float:
    """The CPU-seconds `pid` has used so far (every thread of it), 0 once it is gone."""
    stat = _stat(pid)
    return 0.0 if stat is None else stat[1]


class TreeCpu:
    """The CPU-seconds of a process and of every process started under it, sampled from /proc every `interval`
    seconds in a thread until `stop()`: a descendant is followed once seen, even orphaned (Spark's worker daemon
    outlives its JVM by a moment); what a process uses after its last sample is missed, at most `interval`."""

    def __init__(self, root: int, interval: float = 0.1) -> None:
        self.root = root
        self.interval = interval
        self._used: dict[int, float] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"cpu-of-{root}", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        stats = {int(entry): stat for entry in os.listdir("/proc") if entry.isdigit() and (stat := _stat(int(entry)))}
        for pid, (_, used) in stats.items():
            if pid in self._used:
                self._used[pid] = max(self._used[pid], used)
        for pid, (_, used) in stats.items():
            ancestor, seen = pid, 0
            while ancestor not in self._used and ancestor != self.root and ancestor > 1 and seen < 64:
                ancestor, seen = stats[ancestor][0] if ancestor in stats else 0, seen + 1
            if (ancestor == self.root or ancestor in self._used) and pid not in self._used:
                self._used[pid] = used

    def _run(self) -> None:
        while True:
            self._sample()
            if self._done.wait(self.interval):
                return

    def stop(self) -> float:
        """Stop sampling (after one last sample) and return the tree's CPU-seconds."""
        self._done.set()
        self._thread.join()
        self._sample()
        return self.seconds

    @property
    def seconds(self) -> float:
        return round(sum(self._used.values()), 2)
