"""dr_bringup, then a planned dr_failover, with every task in its own process, as Airflow's executors run them
(`run_dag_in_processes` in conftest.py), on the embedded stack.

dag.test() runs all tasks in the test's process, where anything a task keeps in memory reaches the next task. Here
nothing does: the continuous replicators that dr_bringup's `replicators_started` launches must be found and stopped
by dr_failover's `stop_replication`, another process of another run, through what the tracker keeps on disk; and
afterwards no process of theirs may run, and a process that took no part says so too.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from support.drills import send
from support.kafka import create_topic

from kafka_dr import processes
from kafka_dr.replication import replicators

if TYPE_CHECKING:
    from support.stack import Stack

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(720),
    pytest.mark.xdist_group("airflow_processes"),
]

FLOWS = ("xp-dc1-to-dc2", "xp-dc2-to-dc1")  # names of this module alone: its processes are told apart by them
TOPICS = {"dc1": "xp-orders", "dc2": "xp-returns"}
TOPOLOGY_FLOWS = f"""flows:
  - {{name: {FLOWS[0]}, source: dc1, target: dc2, topics: {{include: ["{TOPICS["dc1"]}"]}}}}
  - {{name: {FLOWS[1]}, source: dc2, target: dc1, topics: {{include: ["{TOPICS["dc2"]}"]}}}}
"""
RECORDS = 10
JOBS: dict[str, dict[int, int]] = {}  # flow -> its job's processes once started, {pid: start ticks}


@pytest.fixture
def topology(stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Two flows with records to copy, and a state directory of this test's own, which every process of the runs
    (tasks, triggerer) inherits. Afterwards, no replicator of these flows is left running."""
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    for dc, topic in TOPICS.items():
        create_topic({"bootstrap.servers": stack.bootstrap(dc)}, topic)
        send(stack.bootstrap(dc), topic, [f"{dc} {topic} {i}" for i in range(RECORDS)])
    yield stack.write_topology("across-processes", TOPOLOGY_FLOWS, schema_registry=False)
    for flow in FLOWS:
        with contextlib.suppress(replicators.ReplicatorError):
            replicators.stop(flow, timeout=15)
        left = {**JOBS.pop(flow, {}), **descendants(replicate_processes(flow))}
        for pid, ticks in left.items():  # what the tracker could not stop, all started by this test's runs
            if processes.is_alive(pid, ticks):
                os.kill(pid, signal.SIGKILL)


def test_bringup_then_planned_failover_with_each_task_in_its_own_process(run_dag_in_processes, topology):
    bringup = run_dag_in_processes(
        "dr_bringup", {"topology": str(topology), "max_lag_records": 0, "max_lag_seconds": None}
    )
    assert bringup.state == "success", bringup.describe()
    assert_each_task_in_its_own_process(bringup)
    assert {key for key in bringup.tasks if key[0] == "replicators_started"} == {
        ("replicators_started", i) for i in range(len(FLOWS))
    }, bringup.describe()
    seen = tracker_status()
    jobs = JOBS  # every live process of each flow's job: replicate.py's and their descendants (PySpark's daemon...)
    for flow in FLOWS:
        assert replicate_processes(flow), f"{flow}: no replicate.py process after dr_bringup\n{bringup.describe()}"
        assert seen[flow]["running"] is True, f"{flow}, seen from a new process: {seen[flow]}"
        jobs[flow] = descendants(replicate_processes(flow))

    failover = run_dag_in_processes(
        "dr_failover",
        {
            "topology": str(topology),
            "failed_cluster": "dc1",
            "target_cluster": "dc2",
            "mode": "planned",
            "groups": ".*",
            "reset_to_datetime": None,
        },
    )
    assert failover.tasks.get(("stop_replication", -1)) == "success", failover.describe()
    assert_each_task_in_its_own_process(failover)
    assert failover.pids[("stop_replication", -1)] not in bringup.pids.values()
    claimed = failover.xcom("stop_replication")["replicators"]
    assert set(claimed) == set(FLOWS), claimed

    alive = {flow: pids for flow in FLOWS if (pids := replicate_processes(flow))}
    assert not alive, (
        f"replicate.py processes still alive after stop_replication reported {claimed}: "
        + "; ".join(
            f"{flow}: " + ", ".join(f"{pid} ({cmd})" for pid, cmd in pids.items()) for flow, pids in alive.items()
        )
        + f"\n{failover.describe()}"
    )
    left = {
        flow: [" ".join(processes.cmdline(pid)) for pid in processes.wait_gone(procs, 0)]
        for flow, procs in jobs.items()
    }
    assert not any(left.values()), f"processes of the stopped jobs still alive: {left}"
    seen = tracker_status()
    for flow in FLOWS:
        assert seen[flow]["running"] is False and seen[flow]["stopped_at"], f"{flow}, from a new process: {seen[flow]}"
    assert failover.state == "success", failover.describe()


def assert_each_task_in_its_own_process(run) -> None:
    ran = {key: pid for key, pid in run.pids.items() if run.tasks[key] not in ("skipped", "upstream_failed")}
    assert all(ran.values()), f"task instances without a process: {ran}"
    assert len(set(ran.values())) == len(ran), f"task instances sharing a process: {ran}"
    assert os.getpid() not in ran.values()


def replicate_processes(flow: str) -> dict[int, str]:
    """Live processes (not zombies) whose command line runs replicate.py for `flow`: {pid: command line}."""
    found = {}
    for entry in Path("/proc").iterdir():
        args = processes.cmdline(int(entry.name)) if entry.name.isdigit() else []
        if any(arg.endswith("replicate.py") for arg in args) and any(
            a == "--flow" and b == flow for a, b in zip(args, args[1:], strict=False)
        ):
            found[int(entry.name)] = " ".join(args)
    return found


def descendants(pids) -> dict[int, int]:
    """`pids` and all their live descendants, {pid: start time in clock ticks} (a pid is not reused unnoticed)."""
    return {pid: ticks for root in pids for pid, ticks in processes.tree(root).items()}


def tracker_status() -> dict[str, dict]:
    """`replicators.status(flow)` of every flow, as a fresh Python process sees it."""
    code = (
        "import dataclasses, json, sys; from kafka_dr.replication import replicators; "
        "print(json.dumps({f: (s := replicators.status(f)) and dataclasses.asdict(s) for f in sys.argv[1:]}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *FLOWS], capture_output=True, text=True, env=os.environ, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(seen.values()), f"the tracker never heard of some flows: {seen}"
    return seen
