"""dr_bringup, a planned dr_failover, a data_kept dr_failback and a disaster dr_failover on Airflow scaled out as users
do: `kafka-dr-dev airflow up --executor celery` (CeleryExecutor, redis-server, two Celery workers), each worker in PID
and UTS namespaces of its own (hostnames worker-1 and worker-2), as two hosts or containers would be. Tasks land on both
workers, so a replicator one worker started is gated, listed and stopped from the other (or from this test's process, a
third namespace) through its target cluster, never by pid; after the disaster nothing is left copying.

The runbooks survive an interruption (issue 28): in each run a task's process is killed with SIGKILL mid-work, with
everything it started (a worker lost): the planned failover's offset translation, with the scheduler killed and started
again too; the failback's resync once it has begun writing what dc2 took after the failover, and its restart of the
flows; the disaster failover's translation from checkpoints and, beside it, its registry redirect, both in one attempt.
Each run fails, is resumed by clearing its failed tasks (AirflowRest.clear_failed, the UI's Clear) and then succeeds:
the group resumes exactly where it was in each cluster, the client aliases and the registries' leader follow, each run
has one complete report, and both clusters hold every record once after the failback. An application's FollowingConsumer
reads the topic through its alias all along, never restarted: it delivers each of the 10,100 records once.

The schema registries move with the data (`_schemas` flows both ways): one leader, dc2's, after each failover, dc1's
after the failback, each shown by a registration through the other registry. A worker of another PID namespace cannot
restart the local stack's registries itself, so the restart command asks this host to (support.stack's
RegistryRestarts), as a deployment's reaches its registry's host; the disaster failover's registry redirect is killed
while that restart runs, and the cleared run restarts the registry again."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support.airflow import airflow_up, kill_task_process, restart_scheduler
from support.browser import AirflowApi
from support.drills import high_watermarks, one_leader, produce, values_of
from support.kafka import commit_offsets, committed_offsets, create_topic, resume_offsets
from support.stack import RegistryRestarts, Stack, registry_restarts, running_stack

from kafka_dr import client_switch, processes
from kafka_dr.follower import FollowingConsumer
from kafka_dr.replication import liveness
from kafka_dr.state import report_path
from kafka_dr.topology import load_topology
from kafka_dr_dev.demo import RUN_TIMEOUT, trigger_and_wait
from kafka_dr_dev.local.airflow import PASSWORD, USER, LocalAirflow

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1200)]

FLOWS = ("cel-dc1-to-dc2", "cel-dc2-to-dc1")
TOPIC, GROUP, READ = "cel-orders", "cel-billing", 60  # the group has read 60 of dc1's 100 records
APP_GROUP = "cel-app"  # the application's: it reads through the alias cel-consumer all along
OUTAGE = 10_000  # records written to dc2 after the planned failover: the failback's resync is killed copying them
TOPOLOGY_FLOWS = f"""flows:
  - {{name: {FLOWS[0]}, source: dc1, target: dc2, topics: {{include: ["{TOPIC}", "_schemas"]}}}}
  - {{name: {FLOWS[1]}, source: dc2, target: dc1, topics: {{include: ["{TOPIC}", "_schemas"]}}}}
"""
CLIENTS = "clients:\n  cel-producer: {cluster: dc1, role: producer}\n  cel-consumer: {cluster: dc1, role: consumer}\n"
KAFKA_DR = Path(sys.executable).parent / "kafka-dr"


def test_bringup_and_failovers_on_two_celery_workers_in_namespaces_of_their_own(tmp_path: Path, monkeypatch) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("KDR_STATE_DIR", str(state))  # this process reads the same tracker as the workers
    with running_stack(tmp_path / "stack") as stack, registry_restarts(stack) as restarts:
        topology = stack.write_topology("celery", TOPOLOGY_FLOWS, restart=restarts.command, extra=CLIENTS)
        dc1 = stack.bootstrap("dc1")
        for bootstrap in (dc1, stack.bootstrap("dc2")):
            create_topic({"bootstrap.servers": bootstrap}, TOPIC)
        registry1 = stack.registry("dc1")
        assert one_leader(registry1, registry1, "cel-before")  # a schema in dc1's store, copied to dc2 by the flow
        produce(dc1, TOPIC, 0, 100)
        commit_offsets({"bootstrap.servers": dc1}, GROUP, {(TOPIC, 0): READ})
        log = tmp_path / "airflow-up.log"
        # No scheduled health run beside the drill's runs but the one of the start (it is not what this drill shows).
        with airflow_up(topology, state, log, executor="celery", health_schedule="@once") as airflow:
            runs = Runs(AirflowApi(airflow.url, USER, PASSWORD), airflow)
            runs.run("dr_bringup", {})
            app = Application(topology)
            listed = replicators_listed(topology)
            assert all(line.startswith(f"{flow}: running: claims it in its target (worker-") for flow, line in
                       zip(FLOWS, listed, strict=True)), listed  # fmt: skip
            # The planned failover's translation loses its worker, and the scheduler is lost and started again.
            planned_failover(runs, stack, topology, lambda: restart_scheduler(airflow, topology, state, log))
            failback(runs, stack, topology)
            disaster_failover(runs, stack, topology, restarts)
            delivered = app.stop_after(len(every_record()), timeout=180)
            assert sorted(delivered) == sorted(every_record()), "the application lost records"
            assert set(Counter(delivered).values()) == {1}, "the application got records twice"
    assert {"worker-1", "worker-2"} <= runs.hosts, runs.hosts


def planned_failover(runs: Runs, stack: Stack, topology: Path, restart: Callable[[], None]) -> None:
    """Its translation killed (and `restart` then): the replicators end, the group resumes in dc2 and the aliases
    and the registries' leader follow."""
    planned = {"failed_cluster": "dc1", "target_cluster": "dc2", "mode": "planned"}
    runs.interrupted("dr_failover", planned, (("translate_offsets[0]", None, restart),))
    ended = replicators_listed(topology)
    assert all(": not running: ended at " in line for line in ended), ended
    # The copy of dc1 offset 60 in dc2 (copy transactions' markers take offsets), found by provenance.
    assert committed_offsets({"bootstrap.servers": stack.bootstrap("dc2")}, GROUP) == in_dc2(stack, READ)
    assert aliases(topology) == {"dc2"}
    assert one_leader(stack.registry("dc1"), stack.registry("dc2"), "cel-after-failover")


def failback(runs: Runs, stack: Stack, topology: Path) -> None:
    """The business goes on in dc2; then the failback, whose resync and restart of the flows each lose their
    worker. It resumes both flows, as a second dr_bringup would, and each cluster holds every record once."""
    dc1, dc2 = stack.bootstrap("dc1"), stack.bootstrap("dc2")
    produce(dc2, TOPIC, 100, OUTAGE)
    copying = lambda: high_watermarks(dc1)[(TOPIC, 0)] > 100  # noqa: E731
    back = {"restored_cluster": "dc1", "serving_cluster": "dc2", "mode": "data_kept"}
    runs.interrupted("dr_failback", back, (("resync[0]", copying, None),), (("flows_resumed[0]", None, None),))
    assert committed_offsets({"bootstrap.servers": dc1}, GROUP) == {(TOPIC, 0): READ}
    assert aliases(topology) == {"dc1"}
    assert one_leader(stack.registry("dc2"), stack.registry("dc1"), "cel-after-failback")
    for bootstrap in (dc1, dc2):  # every record once in each cluster
        values = Counter(values_of(bootstrap, TOPIC))
        assert sorted(values) == sorted(every_record()) and set(values.values()) == {1}, bootstrap
    listed = replicators_listed(topology)
    assert all(line.startswith(f"{flow}: running: ") for flow, line in zip(FLOWS, listed, strict=True)), listed


def disaster_failover(runs: Runs, stack: Stack, topology: Path, restarts: RegistryRestarts) -> None:
    """dc1 lost; the translation and the registry redirect run side by side and both lose their worker in one
    attempt: nothing is left copying, the group resumes in dc2 and dc2's registry alone issues ids."""
    stack.local.stop("dc1")  # lost
    disaster = {"failed_cluster": "dc1", "target_cluster": "dc2", "mode": "disaster"}
    before = len(restarts.begun)
    restarting = lambda: ("dc2", "true") in restarts.begun[before:]  # noqa: E731
    kills = ("translate_offsets[0]", None, None), ("redirect_schema_registry", restarting, None)
    runs.interrupted("dr_failover", disaster, kills)
    # The killed redirect's restart went on; the cleared run's restarted the registry again.
    assert restarts.begun[before:] == [("dc2", "true")] * 2, restarts.begun
    into_dc2 = liveness.liveness(FLOWS[0], {"bootstrap.servers": stack.bootstrap("dc2")})
    # Ended by a request through dc2 (a replicator on the other worker: acknowledged within 5 s, else verify
    # would have seen it renew its claim) or by its own worker's SIGTERM (SIGKILL after 5 s in a disaster).
    assert not into_dc2.running, into_dc2
    # The flow into lost dc1 was asked to stop through its source: no replicator process is left anywhere.
    assert_no_replicator_left(timeout=120)
    # The copy of dc1 offset 60 in dc2 (copy transactions' markers take offsets), found by provenance.
    assert committed_offsets({"bootstrap.servers": stack.bootstrap("dc2")}, GROUP) == in_dc2(stack, READ)
    assert aliases(topology) == {"dc2"}
    assert one_leader(stack.registry("dc2"), stack.registry("dc2"), "cel-after-disaster")


class Runs:
    """The drill's DAG runs through Airflow's REST API, and the hosts (workers) their tasks ran on."""

    def __init__(self, api: AirflowApi, airflow: LocalAirflow) -> None:
        self.api = api
        self.airflow = airflow
        self.hosts: set[str] = set()

    def run(self, dag_id: str, conf: dict[str, str]) -> None:
        step = trigger_and_wait(self.api, dag_id, conf, lambda _line: None)
        self.hosts.update(ti.get("hostname") or "" for ti in self.api.task_instances(dag_id, step.run_id))
        assert step.state == "success", (dag_id, step, self.airflow.log_file("scheduler"))

    def interrupted(self, dag_id: str, conf: dict[str, str], *attempts: tuple[Kill, ...]) -> None:
        """A run whose tasks lose their worker mid-work: in each attempt its kills (of tasks that run side by
        side, each when its moment comes), then Clear."""
        run_id = self.api.trigger(dag_id, conf)["dag_run_id"]
        for kills in attempts:
            self._attempt(dag_id, run_id, kills)
        ended = self.api.wait_finished(dag_id, run_id, RUN_TIMEOUT)
        states = self.api.task_states(dag_id, run_id)
        self.hosts.update(ti.get("hostname") or "" for ti in self.api.task_instances(dag_id, run_id))
        assert ended["state"] == "success", (dag_id, states, self.airflow.log_file("scheduler"))
        report = json.loads(report_path(dag_id, run_id).read_text())  # one per run, written at its end
        assert report["run_id"] == run_id and report["rto_seconds"] > 0, report

    def _attempt(self, dag_id: str, run_id: str, kills: tuple[Kill, ...]) -> None:
        """The kills, side by side; the run fails at those tasks and Clear resumes it."""
        with ThreadPoolExecutor(len(kills)) as pool:
            killed = list(pool.map(lambda kill: self._kill_and_then(dag_id, run_id, *kill), kills))
        ended = self.api.wait_finished(dag_id, run_id, RUN_TIMEOUT)
        states = self.api.task_states(dag_id, run_id)
        tasks = [task for task, _, _ in kills]
        assert ended["state"] == "failed", (tasks, killed, states)
        assert all(states[task] == "failed" for task in tasks), (tasks, killed, states)
        cleared = self.api.clear_failed(dag_id, run_id, f"resumed: {', '.join(tasks)} lost their worker")
        assert set(tasks) <= set(cleared), (cleared, states)

    def _kill_and_then(
        self, dag_id: str, run_id: str, task: str, when: Callable[[], bool] | None, then: Callable[[], None] | None
    ) -> dict[int, int]:
        killed = kill_task_process(self.api, dag_id, run_id, task, when)
        if then is not None:
            then()
        return killed


def in_dc2(stack: Stack, offset: int) -> dict[tuple[str, int], int]:
    """Where the group resumes in dc2 for dc1's `offset` (the copy of it, found by provenance)."""
    return resume_offsets({"bootstrap.servers": stack.bootstrap("dc2")}, TOPIC, {0: offset})


def aliases(topology: Path) -> set[str]:
    """The clusters the client aliases point at."""
    return {a.active for a in client_switch.states(load_topology(topology))}


def every_record() -> list[bytes]:
    """dc1's 100 records and the OUTAGE written to dc2 after the planned failover."""
    return [f"order {i}".encode() for i in range(100 + OUTAGE)]


class Application:
    """An application's consumer, never restarted: a FollowingConsumer of the alias cel-consumer in group APP_GROUP,
    polled in a thread; `delivered` the values in the order it got them."""

    def __init__(self, topology: Path) -> None:
        config = {"group.id": APP_GROUP, "auto.offset.reset": "earliest", "session.timeout.ms": 6000}
        self.consumer = FollowingConsumer(load_topology(topology), "cel-consumer", [TOPIC], config)
        self.delivered: list[bytes] = []
        self._running = True
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while self._running:
            message = self.consumer.poll(0.5)
            if message is not None and message.error() is None:
                self.delivered.append(message.value())

    def stop_after(self, count: int, timeout: float) -> list[bytes]:
        """Once `count` records were delivered (or `timeout` seconds), and a few seconds more for any extra: stop."""
        deadline = time.monotonic() + timeout
        while len(self.delivered) < count and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(3)
        self._running = False
        self._thread.join(30)
        self.consumer.close()
        return list(self.delivered)


Kill = tuple[str, Callable[[], bool] | None, Callable[[], None] | None]  # task, when to kill it, what to do then


def replicators_listed(topology: Path) -> list[str]:
    """`kafka-dr replicators list` from this test's process: neither worker's PID namespace."""
    done = subprocess.run(
        [str(KAFKA_DR), "replicators", "list", *FLOWS, "--topology", str(topology)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.splitlines()


def assert_no_replicator_left(timeout: float) -> None:
    """No replicate.py of FLOWS runs on this machine (this process sees every namespace's processes)."""
    deadline = time.monotonic() + timeout
    while True:
        left = [
            pid
            for pid in processes.tree(1)
            if any(f"--flow={flow}" in " ".join(processes.cmdline(pid)).replace("--flow ", "--flow=") for flow in FLOWS)
        ]
        if not left:
            return
        assert time.monotonic() < deadline, f"replicators still running: {json.dumps(left)}"
        time.sleep(2)
