"""The operators on a real Spark cluster: a standalone master and worker started from the installed pyspark, a
`spark_default` connection pointing at it, and executors whose Python has the jobs' dependencies but not kafka_dr,
in a work folder outside the project. A replication runs there as an application of the cluster; it can only succeed
if its operator ships the package to the executors (--py-files, kafka_dr.spark.submit.package_zip). Every job
operator submits through the same SparkJobOperator and ships the same zip (tests/unit/spark and the operators' unit
tests show the command each one builds), so one application proves the mechanism; translation, verify and backfill
run as applications in every real-scheduler test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from support.fleet import fill
from support.kafka import create_topic
from support.spark import StandaloneSpark, python_without_kafka_dr, standalone_spark

from kafka_dr.airflow.operators.replication import ReplicationOperator
from kafka_dr.spark.submit import spark_env, spark_submit_command

if TYPE_CHECKING:
    from support.stack import Stack

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]

FLOW, TOPIC = "sa-flow", "sa-orders"
PARTITIONS, RECORDS = 4, 2_000  # records per partition: RECORDS / PARTITIONS
LOCAL = 7  # records per partition dc2 holds of its own before the copies


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneSpark]:
    with standalone_spark(tmp_path_factory.mktemp("spark-standalone")) as running:
        yield running


@pytest.fixture(scope="module")
def executor_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return python_without_kafka_dr(tmp_path_factory.mktemp("executor-python"))


def test_a_replication_runs_as_an_application_of_a_standalone_cluster(
    stack: Stack,
    cluster: StandaloneSpark,
    executor_python: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    host, port = cluster.master_url.rsplit(":", 1)
    connection = {"conn_type": "spark", "host": host, "port": int(port), "extra": {"deploy-mode": "client"}}
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(connection))
    monkeypatch.setenv("PYSPARK_PYTHON", str(executor_python))  # the executors' Python: no kafka_dr in it
    monkeypatch.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
    topology = str(
        stack.write_topology(
            "standalone",
            f"flows:\n  - {{name: {FLOW}, source: dc1, target: dc2, topics: {{include: [{TOPIC}]}}}}\n",
            schema_registry=False,
        )
    )
    dc1, dc2 = ({"bootstrap.servers": stack.bootstrap(dc)} for dc in ("dc1", "dc2"))
    create_topic(dc1, TOPIC, PARTITIONS)
    fill(dc1, TOPIC, PARTITIONS, RECORDS // PARTITIONS, "order")
    create_topic(dc2, TOPIC, PARTITIONS)
    fill(dc2, TOPIC, PARTITIONS, LOCAL, "local")
    completed_before = len(cluster.master.state().get("completedapps", []))

    summary = ReplicationOperator(task_id="copy", flow=FLOW, topology=topology).execute({})
    assert summary["status"] == "done" and sum(p["records"] for p in summary["partitions"]) >= RECORDS, summary
    # The job was an application of the cluster, its executors the worker's.
    apps = cluster.master.state().get("completedapps", [])[completed_before:]
    assert len(apps) == 1 and all(app["state"] == "FINISHED" for app in apps), apps
    logged = "".join(capsys.readouterr())  # the operators' task log
    assert f"Spark master {cluster.master_url} (connection spark_default)" in logged
    assert "kafka_dr shipped to the executors as --py-files" in logged


def test_without_the_package_the_executors_cannot_run_a_job(
    stack: Stack, cluster: StandaloneSpark, executor_python: Path, tmp_path: Path
) -> None:
    """The control: the same verify job submitted without --py-files fails in its executors, so the test above
    shows the shipping, not an executor that found kafka_dr some other way."""
    topology = stack.write_topology(
        "standalone-control",
        f"flows:\n  - {{name: {FLOW}, source: dc1, target: dc2, topics: {{include: [{TOPIC}]}}}}\n",
        schema_registry=False,
    )
    command = spark_submit_command("verify", ["--topology", str(topology), "--flow", FLOW], cluster.master_url)
    shipped = command.index("--py-files")
    del command[shipped : shipped + 2]
    env = {**spark_env(), "PYSPARK_PYTHON": str(executor_python), "KDR_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode != 0 and "No module named 'kafka_dr'" in done.stderr, done.stderr[-3000:]
