"""dr_bringup end to end with dag.test() on the embedded stack: real brokers and registries on free ports,
continuous replicate.py jobs through spark-submit in local mode, the deferrable lag gate run inline.

Also: bad params fail the run at its first task with one line, and nothing else runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from airflow.sdk.exceptions import AirflowFailException
from airflow.utils.state import DagRunState, TaskInstanceState
from confluent_kafka import Producer
from support.airflow import load_dag
from support.kafka import create_topic

from kafka_dr.airflow.bringup import validate_topology
from kafka_dr.airflow.operators.replication import ReplicationOperator
from kafka_dr.paths import SPARK_JOBS
from kafka_dr.replication import replicators
from kafka_dr.replication.internal import read_records
from kafka_dr.replication.provenance import hops
from kafka_dr.state import state_dir

if TYPE_CHECKING:
    from support.stack import Stack

REPLICATE_JOB = SPARK_JOBS / "replicate.py"
FLOWS = ("dc1-to-dc2", "dc2-to-dc1")
DEMO_FLOWS = """flows:
  - name: dc1-to-dc2
    source: dc1
    target: dc2
    topics: {include: ["topic1", "topic2", "_schemas"], exclude: []}
    rename: {topic2: "{topic}.replica"}
    provenance: true
    sync_topic_configs: true
    groups: {include: [".*"], exclude: ["console-consumer-.*"]}
  - name: dc2-to-dc1
    source: dc2
    target: dc1
    topics: {include: ["topic1"]}
"""
RECORDS = 20

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def dag(airflow_db: Path) -> Any:
    return load_dag("dr_bringup")


@pytest.fixture
def demo(stack: Stack) -> Iterator[Path]:
    """The Replicator demo topology on this stack, with records in each origin topic; stops the replicators."""
    path = stack.write_topology("demo", DEMO_FLOWS)
    for dc, topics in (("dc1", ("topic1", "topic2")), ("dc2", ("topic1",))):
        for topic in topics:
            create_topic({"bootstrap.servers": stack.bootstrap(dc)}, topic, 2, **{"retention.ms": "604800000"})
        producer = Producer({"bootstrap.servers": stack.bootstrap(dc)})
        for topic in topics:
            for i in range(RECORDS):
                producer.produce(
                    topic,
                    key=f"{dc}-{i}".encode(),
                    value=f"{dc} {topic} {i}".encode(),
                    headers=[("origin", dc.encode())],
                )
        assert producer.flush(10) == 0
    schema = {"schema": json.dumps({"type": "record", "name": "U", "fields": [{"name": "a", "type": "int"}]})}
    response = httpx.post(f"{stack.local.config.dc('dc1').registry_url}/subjects/users-value/versions", json=schema)
    assert response.status_code == 200, response.text
    yield path
    with ThreadPoolExecutor(len(FLOWS)) as pool:  # each stop waits for its replicator's epoch to end
        list(pool.map(replicators.stop, FLOWS))


def test_dr_bringup_brings_replication_up_and_reports(dag: Any, stack: Stack, demo: Path) -> None:
    if not REPLICATE_JOB.exists():
        pytest.fail(f"{REPLICATE_JOB} is missing: dr_bringup has no replication job to start")
    run = dag.test(run_conf={"topology": str(demo), "max_lag_records": 0, "max_lag_seconds": None})
    states = {(ti.task_id, ti.map_index): ti.state for ti in run.get_task_instances()}
    assert run.state == DagRunState.SUCCESS, f"{states}; replicator logs: {_logs()}"
    assert all(state == TaskInstanceState.SUCCESS for state in states.values()), states
    assert {key for key in states if key[0] in ("replicators_started", "lag_gate")} == {
        (task, i) for task in ("replicators_started", "lag_gate") for i in range(len(FLOWS))
    }

    for flow in FLOWS:
        assert replicators.is_running(flow), f"{flow}: the continuous replicator should keep running"
    again = ReplicationOperator(task_id="again", flow=FLOWS[0], mode="continuous", topology=str(demo)).execute({})
    assert again["started"] is False and again["pid"] == replicators.status(FLOWS[0]).pid, "never started twice"
    report = json.loads(next((state_dir() / "reports").glob("dr_bringup-*.json")).read_text())
    assert [entry["flow"] for entry in report["plan"]] == list(FLOWS)
    assert set(report["cluster_ids"]) == {"dc1", "dc2"}
    assert len(set(report["cluster_ids"].values())) == 2
    assert {e["url"] for e in report["schema_registries"].values()} == {
        dc.registry_url for dc in stack.local.config.dcs
    }
    assert {e["leader"] for e in report["schema_registries"].values()} == {stack.local.config.dc("dc1").registry_url}
    assert {lag["flow"]: lag["total_records"] for lag in report["lag"]} == {flow: 0 for flow in FLOWS}
    assert set(report["heartbeat_latency_s"]) == set(FLOWS)
    assert all(0 <= latency < 30 for latency in report["heartbeat_latency_s"].values())
    assert "topic2.replica" in report["topic_sync"]["dc1-to-dc2"]["created"]

    # Every origin record is in its destination exactly once, carrying one provenance hop.
    dc1_topic1 = _read(stack.bootstrap("dc2"), "topic1", origin="dc1")
    assert sorted(dc1_topic1) == sorted(f"dc1 topic1 {i}" for i in range(RECORDS))
    assert sorted(_read(stack.bootstrap("dc2"), "topic2.replica", origin="dc1")) == sorted(
        f"dc1 topic2 {i}" for i in range(RECORDS)
    )
    assert sorted(_read(stack.bootstrap("dc1"), "topic1", origin="dc2")) == sorted(
        f"dc2 topic1 {i}" for i in range(RECORDS)
    )


def test_bad_params_fail_the_first_task_with_one_line_and_change_nothing(dag: Any, stack: Stack) -> None:
    path = stack.write_topology("bad-params", DEMO_FLOWS)
    with pytest.raises(AirflowFailException) as excinfo:
        validate_topology.function(
            params={"topology": str(path), "flows": ["dc1-to-dc3"], "max_lag_records": 0, "max_lag_seconds": None}
        )
    assert str(excinfo.value) == "unknown flow 'dc1-to-dc3' (known: dc1-to-dc2, dc2-to-dc1)"
    with pytest.raises(AirflowFailException, match=r"^.*missing\.yaml: file not found$"):
        validate_topology.function(params={"topology": str(path.with_name("missing.yaml")), "flows": []})
    no_gate = {"topology": str(path), "flows": [], "max_lag_records": None, "max_lag_seconds": None}
    with pytest.raises(AirflowFailException) as excinfo:
        validate_topology.function(params=no_gate)
    assert str(excinfo.value) == (
        "params max_lag_records and max_lag_seconds: give at least one; "
        "see docs/runbooks/dr_bringup.md#a-param-is-refused"
    )

    before = sorted(p.name for p in (state_dir() / "replicators").glob("*.json"))
    run = dag.test(run_conf={"topology": str(path), "flows": ["dc1-to-dc3"]})
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert run.state == DagRunState.FAILED
    assert states.pop("validate_topology") == TaskInstanceState.FAILED
    assert set(states.values()) == {TaskInstanceState.UPSTREAM_FAILED}, states
    assert sorted(p.name for p in (state_dir() / "replicators").glob("*.json")) == before


def _read(bootstrap: str, topic: str, origin: str) -> list[str]:
    """Values of `topic` whose `origin` header is `origin`, checking each carries exactly one provenance hop."""
    values = []
    for msg in read_records({"bootstrap.servers": bootstrap}, topic):
        if dict(msg.headers() or []).get("origin") == origin.encode():
            assert len(hops(msg.headers())) == 1
            values.append(msg.value().decode())
    return values


def _logs() -> str:
    return "; ".join(f"{flow}: {replicators.last_error(flow)}" for flow in FLOWS if replicators.status(flow))
