"""dr_replication_health with dag.test() on the embedded stack: a healthy continuous replicator is OK; its
process killed, the next run restarts it (and says so) and a later run is OK again; records deleted at the
source before they were copied fail the run after the snapshot is written, naming the gap."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from airflow.utils.state import DagRunState, TaskInstanceState
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from support.airflow import load_dag
from support.drills import produce
from support.kafka import create_topic
from support.stack import Stack

from kafka_dr import readiness
from kafka_dr.access import ClusterAccess
from kafka_dr.replication import replicators
from kafka_dr.replication.lag import flow_lag
from kafka_dr.spark.submit import spark_env, spark_submit_command
from kafka_dr.state import report_path
from kafka_dr.topology import load_topology

pytestmark = [pytest.mark.integration, pytest.mark.slow]
FLOW, TOPIC = "hc-flow", "hc-orders"


@pytest.fixture(scope="module")
def dag(airflow_db: Path) -> Any:
    return load_dag("dr_replication_health")


def wait_caught_up(path: Path, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while flow_lag(ClusterAccess.from_environ(load_topology(path)), FLOW).total_records:
        assert time.monotonic() < deadline, f"{FLOW}: {replicators.last_error(FLOW)}"
        time.sleep(1)


def health_run(dag: Any, path: Path, state: Path) -> tuple[Any, dict[str, Any]]:
    """One run; its report (written even when the run fails)."""
    run = dag.test(run_conf={"topology": str(path), "flows": [FLOW]})
    return run, json.loads(report_path("dr_replication_health", run.run_id).read_text())


def test_dead_replicator_is_restarted_and_a_gap_fails_the_run(dag: Any, stack: Stack, state: Path) -> None:
    path = stack.write_topology(
        "health",
        f"  - {{name: {FLOW}, source: dc1, target: dc2, topics: {{include: ['{TOPIC}']}}}}",
        schema_registry=False,
    )
    create_topic({"bootstrap.servers": stack.bootstrap("dc1")}, TOPIC, 1)
    produce(stack.bootstrap("dc1"), TOPIC, 0, 100)
    command = spark_submit_command("replicate", ["--topology", str(path), "--flow", FLOW, "--mode", "continuous"])
    replicators.start(FLOW, command, env=spark_env())
    try:
        wait_caught_up(path)
        run, report = health_run(dag, path, state)
        assert run.state == DagRunState.SUCCESS, report
        assert [f["status"] for f in report["flows"]] == ["OK"] and report["self_heal"] == []
        # Readiness beside the checks, with the lag they measured and the DAGs' paused flags as Airflow gives them.
        found = {f["check"]: f for f in readiness.load()["findings"]}
        assert list(found) == [check.__name__ for check in readiness.CHECKS]
        assert found["flows"] == {
            **found["flows"],
            "ready": True,
            "reason": "1 flow(s) running within the RPO objective",
        }
        assert found["dags_unpaused"]["ready"] is not None, found  # gathered in the task (not "not checked")

        dead = replicators.status(FLOW)
        os.killpg(dead.pid, signal.SIGKILL)  # a crash: nothing records a stop
        while replicators.is_running(FLOW):
            time.sleep(0.1)
        produce(stack.bootstrap("dc1"), TOPIC, 100, 50)
        run, report = health_run(dag, path, state)
        assert run.state == DagRunState.SUCCESS, report  # healed: reported, not failed
        [flow] = report["flows"]
        assert flow["status"] == "ERR" and "STOP the flow's continuous replicator is not running" in flow["problems"]
        [action] = report["self_heal"]
        assert action["action"] == "restarted" and f"process {dead.pid} was gone" in action["reason"], action
        assert replicators.is_running(FLOW) and replicators.status(FLOW).pid != dead.pid

        wait_caught_up(path)
        run, report = health_run(dag, path, state)
        assert run.state == DagRunState.SUCCESS and [f["status"] for f in report["flows"]] == ["OK"], report
    finally:
        replicators.stop(FLOW)

    dc1 = stack.bootstrap("dc1")
    produce(dc1, TOPIC, 150, 300)  # offsets 150-449, never copied: the replicator was stopped on purpose...
    admin = AdminClient({"bootstrap.servers": stack.bootstrap("dc1")})
    admin.delete_records([TopicPartition(TOPIC, 0, 350)])[TopicPartition(TOPIC, 0, 350)].result(10)  # ...then lost
    run, report = health_run(dag, path, state)
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert run.state == DagRunState.FAILED and states["report"] == TaskInstanceState.FAILED, states
    [flow] = report["flows"]
    assert flow["status"] == "ERR" and report["self_heal"] == []  # stopped on purpose: not restarted
    gap = f"GAP {TOPIC}[0] 200 records deleted at the source before they were copied (offsets 150-349)"
    assert gap in flow["problems"], flow
