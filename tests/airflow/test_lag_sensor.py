"""ReplicationLagSensor and ReplicationLagTrigger against real embedded brokers.

Lag is driven the way the replication job moves it: by committing the flow's consumer group (group id =
flow name) on the source. The trigger's run() is driven directly in asyncio, as the triggerer does.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from airflow.sdk.exceptions import AirflowException, AirflowSensorTimeout, TaskDeferred
from airflow.sdk.serde import deserialize, serialize
from airflow.triggers.base import TriggerEvent
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from support.fleet import fill
from support.kafka import create_topic
from support.ports import free_port

from kafka_dr.airflow.sensors.replication_lag import ReplicationLagSensor
from kafka_dr.airflow.triggers.replication_lag import ReplicationLagTrigger
from kafka_dr.replication import replicators
from kafka_dr.replication.fencing import ClaimRenewal, FlowClaim
from kafka_dr.replication.internal import PROGRESS, ensure_internal_topics

if TYPE_CHECKING:
    from support.stack import Stack

FLOW = "lagtest"
TOPIC = "lagtest-events"
PARTITIONS = 2
PER_PARTITION = 5
CLASSPATH = "kafka_dr.airflow.triggers.replication_lag.ReplicationLagTrigger"

pytestmark = pytest.mark.integration


def write_lag_topology(stack: Stack, name: str) -> Path:
    """The flow FLOW from dc1 to dc2 over the lagtest-* topics."""
    flow = f"  - {{name: {FLOW}, source: dc1, target: dc2, topics: {{include: ['lagtest-.*']}}}}"
    return stack.write_topology(name, flow, schema_registry=False)


@pytest.fixture(scope="module")
def topology(stack: Stack) -> Path:
    """A flow over TOPIC, with PER_PARTITION records in each of its partitions on dc1."""
    path = write_lag_topology(stack, "lag")
    dc1 = {"bootstrap.servers": stack.bootstrap("dc1")}
    create_topic(dc1, TOPIC, PARTITIONS)
    fill(dc1, TOPIC, PARTITIONS, PER_PARTITION, "v")
    return path


def commit(stack: Stack, offset: int) -> None:
    """Commit the flow's group at `offset` in every partition, as the replicator does after copying."""
    consumer = Consumer({"bootstrap.servers": stack.bootstrap("dc1"), "group.id": FLOW})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, p, offset) for p in range(PARTITIONS)], asynchronous=False)
    finally:
        consumer.close()


def trigger(topology: Path, **kwargs: object) -> ReplicationLagTrigger:
    settings = {"flow": FLOW, "topology": str(topology), "max_records": 1, "poke_interval": 0.2, "lag_timeout": 5.0}
    return ReplicationLagTrigger(**{**settings, **kwargs})


async def first_event(trig: ReplicationLagTrigger) -> TriggerEvent:
    async for event in trig.run():
        return event
    raise AssertionError("the trigger ended without an event")


def test_trigger_waits_while_lag_is_above_the_threshold_and_fires_when_it_drops(stack: Stack, topology: Path) -> None:
    async def scenario() -> TriggerEvent:
        commit(stack, 0)  # nothing copied: 5 records behind in each partition
        waiting = asyncio.create_task(first_event(trigger(topology, max_records=1)))
        await asyncio.sleep(2)
        assert not waiting.done(), f"fired while 5 records behind: {waiting.result().payload}"
        await asyncio.to_thread(commit, stack, 3)  # 2 behind: still above 1
        await asyncio.sleep(1.5)
        assert not waiting.done(), f"fired while 2 records behind: {waiting.result().payload}"
        dropped_at = time.monotonic()
        await asyncio.to_thread(commit, stack, PER_PARTITION - 1)  # 1 behind: within the threshold
        event = await asyncio.wait_for(waiting, timeout=15)
        assert time.monotonic() - dropped_at < 5, "fired late"
        return event

    event = asyncio.run(scenario())
    assert event.payload["status"] == "success", event.payload
    lag = event.payload["lag"]
    assert lag["flow"] == FLOW and lag["max_records"] == 1 and lag["total_records"] == PARTITIONS
    assert {(p["topic"], p["next_offset"], p["end_offset"]) for p in lag["partitions"]} == {
        (TOPIC, PER_PARTITION - 1, PER_PARTITION)
    }
    assert "within limits" in event.payload["reason"]


def test_trigger_reports_a_timeout_with_the_reason(stack: Stack, topology: Path) -> None:
    commit(stack, 0)
    event = asyncio.run(first_event(trigger(topology, max_records=0, deadline=time.time() + 1)))
    assert event.payload["status"] == "timeout"
    assert f"flow {FLOW}: dc1:{TOPIC}[" in event.payload["reason"] and "records (limit 0)" in event.payload["reason"]


def test_trigger_turns_an_unreachable_cluster_into_an_error_event(stack: Stack) -> None:
    port = free_port()
    path = write_lag_topology(stack, "unreachable")
    path.write_text(path.read_text().replace(stack.bootstrap("dc1"), f"127.0.0.1:{port}"))
    event = asyncio.run(first_event(trigger(path, lag_timeout=1.0)))
    assert event.payload["status"] == "error"
    message = event.payload["message"]
    assert "\n" not in message and f"source cluster dc1 (127.0.0.1:{port})" in message


def test_trigger_serializes_to_its_import_path_and_survives_airflow_serde(topology: Path) -> None:
    original = trigger(
        topology, max_records=10, max_seconds=2.5, topics="lagtest-.*", deadline=1234.5, check_replicator=True
    )
    classpath, kwargs = original.serialize()
    assert classpath == CLASSPATH
    restored = ReplicationLagTrigger(**deserialize(serialize(kwargs)))
    assert restored.serialize() == (classpath, kwargs)
    assert kwargs["max_seconds"] == 2.5 and kwargs["topics"] == "lagtest-.*" and kwargs["check_replicator"]


def test_deferrable_sensor_defers_to_the_trigger_with_a_deadline(topology: Path) -> None:
    sensor = ReplicationLagSensor(
        task_id="gate", flow=FLOW, topology=str(topology), max_records=0, timeout=30, poke_interval=1
    )
    before = time.time()
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    classpath, kwargs = deferred.value.trigger.serialize()
    assert classpath == CLASSPATH and deferred.value.method_name == "execute_complete"
    assert kwargs["flow"] == FLOW and kwargs["max_records"] == 0 and kwargs["topology"] == str(topology)
    assert before + 30 <= kwargs["deadline"] <= time.time() + 30


def test_a_gate_waiting_in_its_worker_passes_once_lag_drops_and_defers_when_it_does_not(
    stack: Stack, topology: Path
) -> None:
    """wait_in_worker (a failover's gate): lag measured in the worker, every WORKER_CHECK_S; met meanwhile, the task
    returns the lag without deferring; not met within the time, it defers as any deferrable gate does."""
    sensor = ReplicationLagSensor(
        task_id="gate", flow=FLOW, topology=str(topology), max_records=0, wait_in_worker=30, timeout=60, lag_timeout=5
    )
    commit(stack, 0)
    threading.Timer(1.0, commit, args=(stack, PER_PARTITION)).start()  # the copies catch up a second later
    passed = sensor.execute({})
    assert passed["total_records"] == 0, passed
    commit(stack, 0)
    brief = ReplicationLagSensor(
        task_id="gate", flow=FLOW, topology=str(topology), max_records=0, wait_in_worker=0.5, timeout=60, lag_timeout=5
    )
    with pytest.raises(TaskDeferred):
        brief.execute({})
    commit(stack, PER_PARTITION)


def test_sensor_turns_trigger_events_into_results_and_one_line_failures(topology: Path) -> None:
    sensor = ReplicationLagSensor(task_id="gate", flow=FLOW, topology=str(topology), max_seconds=5, timeout=30)
    assert sensor.execute_complete({}, {"status": "success", "reason": "ok", "lag": {"flow": FLOW}}) == {"flow": FLOW}
    with pytest.raises(AirflowSensorTimeout, match=r"^flow lagtest: dc1:x\[0\] lags 9.0 s \(limit 5 s\) \(still after"):
        sensor.execute_complete({}, {"status": "timeout", "reason": "flow lagtest: dc1:x[0] lags 9.0 s (limit 5 s)"})
    with pytest.raises(AirflowException, match="^flow lagtest: source cluster dc1 .* failed"):
        sensor.execute_complete({}, {"status": "error", "message": "flow lagtest: source cluster dc1 (h:1): failed"})


def test_sensor_without_thresholds_is_refused() -> None:
    with pytest.raises(ValueError, match="needs max_records or max_seconds"):
        ReplicationLagSensor(task_id="gate", flow=FLOW)


def test_poking_sensor_measures_the_same_way(stack: Stack, topology: Path) -> None:
    sensor = ReplicationLagSensor(
        task_id="gate",
        flow=FLOW,
        topology=str(topology),
        max_records=0,
        deferrable=False,
        poke_interval=0.2,
        timeout=1,
        lag_timeout=5,
    )
    commit(stack, 0)
    assert not sensor.poke({})
    with pytest.raises(AirflowSensorTimeout, match=r"^flow lagtest: dc1:lagtest-events\[\d\] lags 5 records"):
        sensor.execute({})
    commit(stack, PER_PARTITION)
    done = sensor.poke({})
    assert done and done.xcom_value["total_records"] == 0


IN_ANOTHER_NAMESPACE = """
import asyncio, json, sys, time
from kafka_dr.airflow.triggers.replication_lag import ReplicationLagTrigger
from kafka_dr.replication import replicators
from kafka_dr.replication.fencing import ClaimRenewal, FlowClaim
from kafka_dr.replication.internal import PROGRESS, ensure_internal_topics
from kafka_dr.replication import replicators
flow, topology, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
trigger = ReplicationLagTrigger(
    flow=flow, topology=topology, max_records=1, poke_interval=0.2, lag_timeout=5.0, check_replicator=True,
    deadline=time.time() + seconds,
)
async def first():
    async for event in trigger.run():
        return event.payload
print(json.dumps({"here": replicators.status(flow).here, **asyncio.run(first())}))
"""


def test_a_trigger_in_another_pid_namespace_asks_the_target_whether_the_replicator_runs(
    stack: Stack, topology: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The triggerer of a compose file or a Celery worker sees none of the scheduler's pids. Lag above the threshold
    while the replicator claims its flow in the target: the gate waits (here until its deadline) rather than failing
    on a pid it cannot see; once the claims stop without an end (a crash), the gate fails naming that."""
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))  # inherited by the process below
    dc2 = {"bootstrap.servers": stack.bootstrap("dc2")}
    ensure_internal_topics(AdminClient(dc2), (PROGRESS,))
    commit(stack, 0)  # 5 records behind in each partition
    stand_in, _ = replicators.start(FLOW, [sys.executable, "-c", "import time; time.sleep(120)"])
    claim, renewing = FlowClaim(FLOW, dc2, {"host": "scheduler", "pid": stand_in.pid}), threading.Event()
    assert claim.holds()
    ClaimRenewal(claim, renewing, lost=lambda: None).start()

    def gate(seconds: float) -> dict[str, Any]:
        command = ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", IN_ANOTHER_NAMESPACE]
        done = subprocess.run([*command, FLOW, str(topology), str(seconds)], capture_output=True, text=True, timeout=90)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    try:
        waited = gate(4.0)
        assert waited["here"] is False and waited["status"] == "timeout", waited
        renewing.set()  # the replicator dies without a last owner record
        failed = gate(30.0)
        assert failed["status"] == "error", failed
        died = f"its replicator (scheduler pid {stand_in.pid}) stopped renewing its claim: it died"
        assert failed["message"].endswith(died), failed
    finally:
        renewing.set()
        replicators.stop(FLOW, timeout=5)
