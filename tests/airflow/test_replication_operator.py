"""ReplicationOperator in bounded mode: spark-submit (local[2], from the spark_default connection) runs
replicate.py to the end; the summary is the task result; secrets travel in the job's environment only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from airflow.sdk.exceptions import AirflowException
from support.drills import send
from support.kafka import create_topic

from kafka_dr.airflow.operators.replication import REPLICATE_JOB, ReplicationOperator

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
    # Flows also carry `_kdr.heartbeats`, which other tests on this shared stack may have fed.
    assert sum(p["records"] for p in summary["partitions"] if p["topic"] == "optopic") == RECORDS
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
