"""Every task of dr_failover and dr_failback can run again (issue 28, point 5): in dag.test(), each task's execute runs
twice in a row, and the second run must change nothing that matters: the data topics' ends and every group's offsets
in both clusters, the registries' roles, the aliases and their history, which replicators run. A task that raises
(a skip, a branch, a deferral) runs once. What a re-run after a crash would do, without the crash; the kills
themselves are the real scheduler's drills."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from airflow.utils.state import DagRunState
from support.drills import (
    copy_flow,
    fail_back,
    fail_over,
    observable,
    produce,
    read_and_commit,
    states_of,
    write_topology,
)
from support.kafka import commit_offsets, create_topic

from kafka_dr import client_switch
from kafka_dr.replication import replicators
from kafka_dr.topology import load_topology

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.usefixtures("jobs_in_process")]
SETTLE_S = 3.0  # longer than a heartbeat's and an epoch's round, so a running replicator's copies show between looks
SETTLE_TIMEOUT = 60.0


@contextlib.contextmanager
def each_task_twice(dag: Any, observe: Callable[[], Any]) -> Iterator[list[str]]:
    """Within the block, every task of `dag` runs its execute twice; yields the list of tasks whose second run
    changed what `observe` returns (with what changed)."""
    changed: list[str] = []
    classes = {getattr(task, "operator_class", type(task)) for task in dag.tasks}
    with pytest.MonkeyPatch.context() as patch:
        for cls in classes:
            patch.setattr(cls, "execute", _twice(cls.execute, observe, changed))
        yield changed


def _twice(original: Callable[..., Any], observe: Callable[[], Any], changed: list[str]) -> Callable[..., Any]:
    def execute(self: Any, context: Any) -> Any:
        result = original(self, context)  # a task that raises (skip, branch, deferral) runs once
        before = _settled(observe)
        original(self, context)
        after = _settled(observe)
        if after != before:
            changed.append(f"{self.task_id}: {_difference(before, after)}")
        return result

    return execute


def _settled(observe: Callable[[], Any], timeout: float = SETTLE_TIMEOUT) -> Any:
    """What `observe` returns, once two looks SETTLE_S apart agree while a replicator runs: one the task started
    copies what is there, and that is the first run's doing, not the second's."""
    deadline = time.monotonic() + timeout
    seen = observe()
    if not any(seen["replicators"].values()):
        return seen
    while True:
        time.sleep(SETTLE_S)
        again = observe()
        if again == seen or time.monotonic() > deadline:
            return again
        seen = again


def _difference(before: Any, after: Any) -> str:
    if isinstance(before, dict) and isinstance(after, dict):
        keys = sorted({*before, *after}, key=str)
        return "; ".join(
            f"{key}: {_difference(before.get(key), after.get(key))}"
            for key in keys
            if before.get(key) != after.get(key)
        )
    return f"{before!r} -> {after!r}"


def test_each_task_of_a_failover_and_a_failback_run_twice_changes_nothing_the_second_time(
    dags, own_stack, state, tmp_path
):
    """A planned failover dc1 -> dc2, then a failback (data_kept, republish), each with every task run twice: both
    succeed, no second run changes anything, and the group reads every record once overall. Nothing new is written
    to dc2 meanwhile, so the group in dc1 resumes after the originals of the copies it read in dc2 (before the
    translation knew of such round trips, it resumed at dc1's log start and read all 300 again)."""
    dc1, dc2 = own_stack.config.dc("dc1"), own_stack.config.dc("dc2")
    topology = write_topology(own_stack, tmp_path / "t.yaml", "twice", registry=False)
    loaded = load_topology(topology)
    for dc in (dc1, dc2):
        create_topic({"bootstrap.servers": dc.broker_address}, "twice")
    produce(dc1.broker_address, "twice", 0, 300)
    copy_flow(loaded, "wp-dc1-to-dc2")
    commit_offsets({"bootstrap.servers": dc1.broker_address}, "billing", {("twice", 0): 200})

    def observe() -> Any:
        flows = {flow.name: replicators.is_running(flow.name) for flow in loaded.flows}
        return {
            **observable(own_stack, topology, ("dc1", "dc2"), live=True),
            "replicators": flows,
            "history": client_switch.history(),
        }

    with each_task_twice(dags["dr_failover"], observe) as changed:
        run = fail_over(dags, topology, "planned", groups=".*")
    assert run.state == DagRunState.SUCCESS, states_of(run)
    assert changed == [], changed

    read_in_dc2 = read_and_commit(dc2.broker_address, "billing", "twice")
    try:
        with each_task_twice(dags["dr_failback"], observe) as changed:
            run = fail_back(dags, topology, unreplicated="republish")
        assert run.state == DagRunState.SUCCESS, states_of(run)
        assert changed == [], changed
        read_in_dc1 = read_and_commit(dc1.broker_address, "billing", "twice")
        assert read_in_dc1 == []  # it had read everything in dc2
        overall = [f"order {i}".encode() for i in range(200)] + read_in_dc2 + read_in_dc1
        assert sorted(overall) == sorted(f"order {i}".encode() for i in range(300))  # each once, none lost
    finally:
        replicators.stop("wp-dc1-to-dc2")
