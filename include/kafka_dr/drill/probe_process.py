"""The probe application (probe.py) as a detached process: it outlives the task that starts it (Airflow runs each task
in a process of its own), and the drill's later tasks steer and read it through two files in its folder:
- `control.json`, written by the tasks: {"consume": bool, "produce": bool, "run": bool}; the probe reads it every
  STEER_S (holding the consumer before a disaster shows the group resumed where it was, not at the end);
- `tally.json`, written by the probe every PUBLISH_S and as it ends: what its producer and consumer counted
  (`Tally`), whether its consumer has partitions, whether its producer has flushed, and whether it ended.
The folder is the drill run's (STATE_DIR/drill-runs/<run>/probe): tasks on other hosts steer it when STATE_DIR is
shared.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .. import processes
from ..state import write_json
from ..topology import load_topology
from .probe import ProbeApplication
from .waits import WaitTimeout, wait_until

STEER_S = 0.2
PUBLISH_S = 1.0
START_TIMEOUT_S = 60.0
_MARK = "--- kafka-dr drill probe starts at "


class ProbeError(RuntimeError):
    """The probe did not start, or died; one line naming its log."""


def start(
    folder: Path,
    topology_file: str,
    topic: str,
    producer_alias: str,
    consumer_alias: str,
    rate: float,
    env: Mapping[str, str],
) -> dict[str, Any]:
    """Start the probe detached, the clusters' settings in its environment (`env`: ClusterAccess.child_environ), and
    return its first tally once its consumer has partitions and its producer has sent; ProbeError naming the log when
    it exits or does not get there within START_TIMEOUT_S."""
    folder.mkdir(parents=True, exist_ok=True)
    kill(folder)  # a retried task's earlier probe: one probe per drill
    steer(folder, consume=True, produce=True, run=True)
    (folder / "tally.json").unlink(missing_ok=True)
    command = [
        sys.executable, "-m", "kafka_dr.drill.probe_process", "--folder", str(folder), "--topology", topology_file,
        "--topic", topic, "--producer-alias", producer_alias, "--consumer-alias", consumer_alias, "--rate", str(rate),
    ]  # fmt: skip
    proc = processes.spawn(command, folder / "probe.log", _MARK, env)
    write_json(folder / "pid.json", {"pid": proc.pid, "ticks": processes.start_ticks(proc.pid)})

    def started() -> dict[str, Any]:
        if proc.poll() is not None:
            raise ProbeError(f"the probe exited with {proc.returncode} at its start: {_last_line(folder)}")
        return read(folder)

    try:
        return wait_until(
            started, lambda tally: bool(tally.get("assigned")) and tally.get("sent", 0) > 0, timeout=START_TIMEOUT_S,
            every=STEER_S, what="the probe did not produce and consume",
        )  # fmt: skip
    except WaitTimeout as exc:
        kill(folder)
        raise ProbeError(f"{exc}: see {folder / 'probe.log'}") from None


def steer(folder: Path, **flags: bool) -> None:
    """Change the probe's control flags (`consume`, `produce`, `run`); the others keep their values."""
    path = folder / "control.json"
    current = json.loads(path.read_text()) if path.exists() else {}
    write_json(path, {**current, **flags})


def read(folder: Path) -> dict[str, Any]:
    """The probe's newest tally ({} before its first)."""
    path = folder / "tally.json"
    return json.loads(path.read_text()) if path.exists() else {}


def running(folder: Path) -> bool:
    pid = _pid(folder)
    return pid is not None and processes.is_alive(*pid)


def stop(folder: Path, drain_timeout: float) -> dict[str, Any]:
    """Stop producing, wait until the consumer has every acknowledged record (`drain_timeout` at most), then end the
    probe; its last tally with `drained`. A probe that died meanwhile gives its last tally, `drained` False."""
    steer(folder, produce=False, consume=True)
    try:
        tally = wait_until(
            lambda: read(folder), lambda tally: _drained(tally) or not running(folder), timeout=drain_timeout,
            every=STEER_S, what="the probe did not drain",
        )  # fmt: skip
    except WaitTimeout as exc:
        tally = exc.last  # `drained` False says it
    drained = _drained(tally)
    steer(folder, run=False)
    pid = _pid(folder)
    if pid is not None and processes.wait_gone({pid[0]: pid[1]}, 45.0 + PUBLISH_S):
        kill(folder)
    return {**read(folder), "drained": drained}


def _drained(tally: dict[str, Any]) -> bool:
    """The producer flushed and the consumer has every record it acknowledged."""
    return bool(tally.get("flushed")) and set(tally.get("acknowledged", [])) <= set(tally.get("consumed", []))


def kill(folder: Path) -> bool:
    """End the probe at once (an interrupted drill); True when one was running."""
    pid = _pid(folder)
    if pid is None or not processes.is_alive(*pid):
        return False
    processes.send(pid[0], signal.SIGKILL)
    processes.wait_gone({pid[0]: pid[1]}, 5.0)
    return True


def _pid(folder: Path) -> tuple[int, int | None] | None:
    path = folder / "pid.json"
    if not path.exists():
        return None
    record = json.loads(path.read_text())
    return record["pid"], record["ticks"]


def _last_line(folder: Path) -> str:
    lines = (folder / "probe.log").read_text(errors="replace").strip().splitlines()
    return lines[-1] if lines else f"nothing in {folder / 'probe.log'}"


def _publish(folder: Path, app: ProbeApplication, **state: bool) -> None:
    tally = asdict(app.tally)
    tally["acknowledged"], tally["refused"] = sorted(tally["acknowledged"]), sorted(tally["refused"])
    write_json(folder / "tally.json", {**tally, "run": app.run, "group": app.group, "topic": app.topic, **state})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kafka_dr.drill.probe_process")
    for name in ("folder", "topology", "topic", "producer-alias", "consumer-alias"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--rate", type=float, required=True)
    args = parser.parse_args(argv)
    folder = Path(args.folder)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    client_log = logging.getLogger("kafka_dr.drill.clients")  # librdkafka's messages, into probe.log
    app = ProbeApplication(
        load_topology(args.topology), args.topic, args.producer_alias, args.consumer_alias, args.rate,
        log=print, client_log=client_log,
    )  # fmt: skip
    signal.signal(signal.SIGTERM, lambda *_: steer(folder, run=False))
    app.start(START_TIMEOUT_S)
    print(f"probe {app.run}: {args.rate:g} records/s to {args.topic}", flush=True)
    producing, published = True, 0.0
    while True:
        control = json.loads((folder / "control.json").read_text())
        if not control.get("run", True):
            break
        if control.get("consume", True):
            app.release_consumer()
        else:
            app.hold_consumer()
        if producing and not control.get("produce", True):
            app.stop_producing()  # flushes: `flushed` says the producer's counts are final
            producing = False
        if time.monotonic() - published >= PUBLISH_S:
            _publish(folder, app, assigned=True, flushed=not producing, ended=False)
            published = time.monotonic()
        time.sleep(STEER_S)
    app.stop()
    _publish(folder, app, assigned=True, flushed=True, ended=True)
    print(f"probe {app.run}: ended ({app.tally.sent} sent, {len(set(app.tally.consumed))} consumed)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
