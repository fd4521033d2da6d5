"""dr_bringup, a planned and then a disaster dr_failover on Airflow scaled out as users do: `kafka-dr airflow up
--executor celery` (CeleryExecutor, redis-server, two Celery workers), each worker in PID and UTS namespaces of its
own (hostnames worker-1 and worker-2), as two hosts or containers would be. Tasks land on both workers, so a
replicator one worker started is gated, listed and stopped from the other (or from this test's process, a third
namespace) through its target cluster, never by pid; after the disaster nothing is left copying.

The topology has no schema registry section: the local stack's registry restart signals a pid, which a worker of
another PID namespace cannot (a deployment's restart command reaches its registry's host, as the compose file's does).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.airflow import airflow_up
from support.drills import produce
from support.kafka import create_topic
from support.stack import running_stack

from kafka_dr import processes
from kafka_dr.airflow_rest import AirflowRest
from kafka_dr.demo.drill import trigger_and_wait
from kafka_dr.local.airflow import PASSWORD, USER
from kafka_dr.replication import liveness

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

FLOWS = ("cel-dc1-to-dc2", "cel-dc2-to-dc1")
TOPIC = "cel-orders"
TOPOLOGY_FLOWS = f"""flows:
  - {{name: {FLOWS[0]}, source: dc1, target: dc2, topics: {{include: ["{TOPIC}"]}}}}
  - {{name: {FLOWS[1]}, source: dc2, target: dc1, topics: {{include: ["{TOPIC}"]}}}}
"""
CLIENTS = "clients:\n  cel-producer: {cluster: dc1, role: producer}\n  cel-consumer: {cluster: dc1, role: consumer}\n"
KAFKA_DR = Path(sys.executable).parent / "kafka-dr"


def test_bringup_and_failovers_on_two_celery_workers_in_namespaces_of_their_own(tmp_path: Path, monkeypatch) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("KDR_STATE_DIR", str(state))  # this process reads the same tracker as the workers
    with running_stack(tmp_path / "stack") as stack:
        topology = stack.write_topology("celery", TOPOLOGY_FLOWS, schema_registry=False, extra=CLIENTS)
        for dc in ("dc1", "dc2"):
            create_topic({"bootstrap.servers": stack.bootstrap(dc)}, TOPIC)
        produce(stack.bootstrap("dc1"), TOPIC, 0, 100)
        with airflow_up(topology, state, tmp_path / "airflow-up.log", executor="celery") as airflow:
            api = AirflowRest(airflow.url, USER, PASSWORD)
            hosts: set[str] = set()

            def run(dag_id: str, conf: dict[str, str]) -> None:
                step = trigger_and_wait(api, dag_id, conf, lambda _line: None)
                hosts.update(ti.get("hostname") or "" for ti in api.task_instances(dag_id, step.run_id))
                assert step.state == "success", (dag_id, step, airflow.log_file("scheduler"))

            run("dr_bringup", {})
            listed = replicators_listed(topology)
            assert all(line.startswith(f"{flow}: running: claims it in its target (worker-") for flow, line in
                       zip(FLOWS, listed, strict=True)), listed  # fmt: skip
            run("dr_failover", {"failed_cluster": "dc1", "target_cluster": "dc2", "mode": "planned"})
            ended = replicators_listed(topology)
            assert all(": not running: ended at " in line for line in ended), ended

            run("dr_bringup", {})  # replication again, then dc1 is lost
            stack.local.stop("dc1")
            run("dr_failover", {"failed_cluster": "dc1", "target_cluster": "dc2", "mode": "disaster"})
            into_dc2 = liveness.liveness(FLOWS[0], {"bootstrap.servers": stack.bootstrap("dc2")})
            # Ended by a request through dc2 (a replicator on the other worker: acknowledged within 5 s, else verify
            # would have seen it renew its claim) or by its own worker's SIGTERM (SIGKILL after 5 s in a disaster).
            assert not into_dc2.running, into_dc2
            # The flow into lost dc1 was asked to stop through its source: no replicator process is left anywhere.
            assert_no_replicator_left(timeout=120)
    assert {"worker-1", "worker-2"} <= hosts, hosts


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
