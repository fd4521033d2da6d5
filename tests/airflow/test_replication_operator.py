"""ReplicationOperator: in bounded mode spark-submit (local[2], from the spark_default connection) runs replicate.py
to the end, the summary is the task result, and secrets travel in the job's environment only; in continuous mode
the task ends when the started job has claimed its flow in the target, or fails with the job's reason."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from airflow.sdk.exceptions import AirflowException
from support.drills import send
from support.kafka import create_topic
from support.spark import topic_total

from kafka_dr.airflow.operators.replication import REPLICATE_JOB, ReplicationOperator
from kafka_dr.replication import replicators
from kafka_dr.replication.internal import PROGRESS, latest_value, owner_key

if TYPE_CHECKING:
    from support.stack import Stack

SECRET = "op-s3cret-value"
RECORDS = 30

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def topology(stack: Stack) -> Path:
    if not REPLICATE_JOB.exists():
        pytest.fail(f"{REPLICATE_JOB} is missing")
    path = stack.write_topology(
        "bounded",
        """flows:
  - name: op-bounded
    source: dc1
    target: dc2
    topics: {include: ["optopic"]}
  - name: op-narrow
    source: dc1
    target: dc2
    topics: {include: ["opwide"]}
""",
        schema_registry=False,
    )
    for dc, topic, partitions in (("dc1", "optopic", 2), ("dc1", "opwide", 3), ("dc2", "opwide", 1)):
        create_topic({"bootstrap.servers": stack.bootstrap(dc)}, topic, partitions)
    send(stack.bootstrap("dc1"), "optopic", [f"v{i}" for i in range(RECORDS)])
    return path


def test_bounded_run_returns_the_job_summary_and_keeps_secrets_off_the_command_line(
    topology: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A setting plaintext librdkafka accepts (with a warning), standing in for SASL credentials.
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_DR_DC1",
        json.dumps(
            {"conn_type": "kafka_dr", "login": "alice", "password": SECRET, "extra": {"client.id": "kdr-op-test"}}
        ),
    )
    summary = ReplicationOperator(task_id="copy", flow="op-bounded", topology=str(topology)).execute({})
    assert summary["status"] == "done" and summary["lost"] == 0
    assert topic_total(summary, "optopic") == RECORDS
    assert {p["dest_topic"] for p in summary["partitions"]} >= {"optopic"}
    logged = "".join(capsys.readouterr())
    assert "Spark-Submit cmd: spark-submit --master local[2]" in logged and "--deploy-mode client" in logged
    assert SECRET not in logged


def test_bad_input_from_the_job_fails_the_task_with_its_one_line_reason(topology: Path) -> None:
    with pytest.raises(AirflowException) as excinfo:
        ReplicationOperator(task_id="copy", flow="op-narrow", topology=str(topology)).execute({})
    message = str(excinfo.value)
    assert message.startswith(
        "flow op-narrow: bounded replication bad input (exit code 2): destination topic "
        "dc2:opwide has 1 partitions, fewer than its source dc1:opwide (3)"
    ), message
    assert "\n" not in message


def test_a_continuous_start_succeeds_once_its_replicator_has_claimed_the_flow(
    topology: Path, stack: Stack, state
) -> None:
    """The task returns when the started job has begun its first epoch (its claim is in the target), not after a
    fixed wait; the claim names the job's driver."""
    started_at = time.time()
    result = ReplicationOperator(task_id="start", flow="op-bounded", mode="continuous", topology=str(topology)).execute(
        {}
    )
    try:
        assert result["started"] and replicators.is_running("op-bounded")
        claim = latest_value({"bootstrap.servers": stack.bootstrap("dc2")}, PROGRESS, owner_key("op-bounded"))
        assert claim is not None and json.loads(claim)["started_at"] >= started_at, claim
    finally:
        replicators.stop("op-bounded")


def test_a_continuous_job_that_ends_at_start_fails_the_task_with_its_one_line_reason(
    topology: Path, state: Path
) -> None:
    with pytest.raises(AirflowException) as excinfo:
        ReplicationOperator(task_id="start", flow="op-narrow", mode="continuous", topology=str(topology)).execute({})
    message = str(excinfo.value)
    assert message.startswith("flow op-narrow: replicator exited during startup: "), message
    assert "destination topic dc2:opwide has 1 partitions, fewer than its source dc1:opwide (3)" in message, message
    assert "\n" not in message and not replicators.is_running("op-narrow")
