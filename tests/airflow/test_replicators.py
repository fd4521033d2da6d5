"""The replicator tracker with stand-in processes shaped like spark-submit: a launcher (the JVM) that runs the
application as a child (the Python driver) in its process group, with the same trailing arguments."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kafka_dr import processes
from kafka_dr.replication import replicators
from kafka_dr.replication.replicators import ReplicatorError
from kafka_dr.state import state_dir

LAUNCHER = """
import signal, subprocess, sys
signal.signal(signal.SIGTERM, lambda *_: open(sys.argv[1] + ".events", "a").write("launcher got SIGTERM\\n"))
child = subprocess.Popen([sys.executable, *sys.argv[1:]])
while True:
    try:
        sys.exit(child.wait())
    except InterruptedError:
        continue
"""
APP = """
import signal, sys, time
mode = sys.argv[sys.argv.index("--on-term") + 1]
def on_term(*_):
    open(sys.argv[0] + ".events", "a").write("app stopped cleanly\\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term if mode == "exit" else signal.SIG_IGN)
if mode == "fail":
    print("replicate: error: flow f: target cluster dc2 (127.0.0.1:1) unreachable", file=sys.stderr, flush=True)
    sys.exit(1)
print("copying", flush=True)
time.sleep(120)
"""


@pytest.fixture
def scripts(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "launcher.py").write_text(textwrap.dedent(LAUNCHER))
    (tmp_path / "app.py").write_text(textwrap.dedent(APP))
    return tmp_path / "launcher.py", tmp_path / "app.py"


def command(scripts: tuple[Path, Path], flow: str, on_term: str = "exit") -> list[str]:
    launcher, app = scripts
    return [sys.executable, str(launcher), str(app), "--flow", flow, "--on-term", on_term]


def wait_for(condition, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_start_tracks_the_job_and_never_starts_a_running_flow_twice(scripts: tuple[Path, Path]) -> None:
    first, started = replicators.start("t-once", command(scripts, "t-once"), {"KDR_CLUSTER_DC1_CONFIG": "{}"})
    try:
        assert started and first.running and replicators.is_running("t-once")
        again, started_again = replicators.start("t-once", command(scripts, "t-once"))
        assert not started_again and again.pid == first.pid
        state = json.loads((state_dir() / "replicators" / "t-once.json").read_text())
        assert state["command"] == command(scripts, "t-once") and "KDR_CLUSTER_DC1_CONFIG" not in json.dumps(state)
        wait_for(lambda: "copying" in Path(first.log).read_text(), "the job's output in its log")
    finally:
        replicators.stop("t-once", timeout=10)


def test_stop_lets_the_application_itself_finish_then_records_the_stop(scripts: tuple[Path, Path]) -> None:
    replicator, _ = replicators.start("t-stop", command(scripts, "t-stop"))
    app = scripts[1]
    wait_for(lambda: "copying" in Path(replicator.log).read_text(), "the application to run")
    stopped = replicators.stop("t-stop", timeout=10)
    assert stopped is not None and not stopped.running and stopped.stopped_at
    assert Path(f"{app}.events").read_text() == "app stopped cleanly\n", "only the application gets SIGTERM"
    assert not replicators.is_running("t-stop") and replicators.status("t-stop").stopped_at == stopped.stopped_at


def test_a_job_ignoring_sigterm_is_killed_after_the_timeout(scripts: tuple[Path, Path]) -> None:
    replicator, _ = replicators.start("t-kill", command(scripts, "t-kill", on_term="ignore"))
    wait_for(lambda: "copying" in Path(replicator.log).read_text(), "the application to run")
    started = time.monotonic()
    assert not replicators.stop("t-kill", timeout=1).running
    assert time.monotonic() - started < 1 + replicators.KILL_GRACE


def test_a_dead_job_is_not_running_and_its_error_line_is_kept(scripts: tuple[Path, Path]) -> None:
    replicators.start("t-dead", command(scripts, "t-dead", on_term="fail"))
    wait_for(lambda: not replicators.is_running("t-dead"), "the job to exit")
    assert replicators.last_error("t-dead") == "replicate: error: flow f: target cluster dc2 (127.0.0.1:1) unreachable"
    again, started = replicators.start("t-dead", command(scripts, "t-dead", on_term="exit"))
    try:
        assert started and again.running, "a dead replicator is started again"
    finally:
        replicators.stop("t-dead", timeout=10)


def test_a_recycled_pid_is_not_taken_for_the_replicator(scripts: tuple[Path, Path]) -> None:
    path = state_dir() / "replicators" / "t-reused.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "flow": "t-reused",
                "pid": os.getpid(),
                "command": command(scripts, "t-reused"),
                "log": "x.log",
                "started_at": "2026-01-01T00:00:00+00:00",
                "stopped_at": None,
            }
        )
    )
    assert replicators.status("t-reused").running is False  # this pid runs pytest, not the job
    assert replicators.stop("t-reused").running is False  # and pytest is not signalled


def test_unknown_and_bad_flows() -> None:
    assert replicators.status("t-never") is None and replicators.stop("t-never") is None
    with pytest.raises(ReplicatorError, match="bad flow name '../x'"):
        replicators.status("../x")


def in_another_process(code: str) -> str:
    """Run tracker calls in a new Python process, as Airflow runs each task; returns its standard output."""
    result = subprocess.run(
        [sys.executable, "-c", "from kafka_dr.replication import replicators\n" + code],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_every_process_sees_the_replicator_that_one_process_started(scripts: tuple[Path, Path]) -> None:
    """The launcher execs into a program with another command line, as spark-submit execs into the JVM."""
    launcher, app = scripts
    execs = [
        "sh",
        "-c",
        'exec "$0" "$@"',
        sys.executable,
        str(launcher),
        str(app),
        "--flow",
        "t-procs",
        "--on-term",
        "exit",
    ]
    pid = int(in_another_process(f"print(replicators.start('t-procs', {execs!r})[0].pid)"))
    wait_for(lambda: "copying" in Path(replicators.status("t-procs").log).read_text(), "the application to run")
    job = processes.tree(pid)
    assert len(job) == 2, "the launcher and the application run"
    assert in_another_process("print(replicators.is_running('t-procs'))") == "True"
    assert in_another_process(f"print(replicators.start('t-procs', {execs!r})[1])") == "False", "never twice"
    assert in_another_process("print(replicators.stop('t-procs', timeout=10).running)") == "False"
    assert Path(f"{app}.events").read_text() == "app stopped cleanly\n"
    assert not processes.wait_gone(job, 0), "stop returns once every process of the job is gone"
    assert in_another_process("print(replicators.is_running('t-procs'))") == "False"


def test_the_cli_lists_the_replicators_and_stops_them(
    scripts: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kafka-dr replicators [list|stop] [FLOW...]`: what a demo leaves running is stopped from a terminal."""
    from kafka_dr.cli import main

    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))  # only this test's replicators
    replicator, _ = replicators.start("t-cli", command(scripts, "t-cli"))
    try:
        wait_for(lambda: "copying" in Path(replicator.log).read_text(), "the application to run")
        assert main(["replicators"]) == 0
        assert capsys.readouterr().out == f"t-cli: running: pid {replicator.pid} on this host, log {replicator.log}\n"
        assert main(["replicators", "stop"]) == 0 and capsys.readouterr().out == "t-cli: stopped\n"
        assert not replicators.is_running("t-cli")
        assert main(["replicators", "list", "t-cli", "t-none"]) == 0
        stopped_at = replicators.status("t-cli").stopped_at
        assert capsys.readouterr().out == f"t-cli: not running: stopped at {stopped_at}\nt-none: never started\n"
    finally:
        replicators.stop("t-cli", timeout=10)
