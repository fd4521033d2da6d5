"""Fixtures of the Airflow tests: a throw-away AIRFLOW_HOME (set here, at conftest import, before any test module
imports airflow), a migrated metadata DB for the tests that run DAGs, a stack of a module's own, and DAG runs with
every task in its own process (the session's stack is tests/conftest.py's). The harness itself is support.airflow."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.airflow import DagRunResult, configure_environment, execution_api, migrate_db, run_dag
from support.spark import submit_in_process
from support.stack import running_stack

from kafka_dr_dev.local.stack import LocalStack

SESSION_DIR = Path(tempfile.mkdtemp(prefix="kdr-airflow-tests-"))
configure_environment(SESSION_DIR)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if os.environ.get("KDR_KEEP_TEST_DIRS") != "1":
        shutil.rmtree(SESSION_DIR, ignore_errors=True)


@pytest.fixture(scope="session")
def airflow_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated metadata DB in this session's AIRFLOW_HOME, migrated once for all xdist workers of the run (their
    base temporary folders are subfolders of the run's)."""
    base = tmp_path_factory.getbasetemp()
    return migrate_db(base.parent if "PYTEST_XDIST_WORKER" in os.environ else base)


@pytest.fixture(scope="module")
def dags(airflow_db: Path) -> dict[str, Any]:
    """The DAGs of dags/, parsed once per module, for dag.test(): not once per session, because dag.test() keeps
    the params of an earlier run's conf in the DAG object, and a module's runs must not inherit another's."""
    from airflow.dag_processing.dagbag import DagBag  # not at import: AIRFLOW_HOME is set first, above

    bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    assert not bag.import_errors, bag.import_errors
    return bag.dags


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A test's own KDR_STATE_DIR: tracked replicators, client aliases and reports start empty."""
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


@pytest.fixture
def jobs_in_process(spark: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """The DAG's bounded Spark jobs run in this process on the session's Spark (support.spark.submit_in_process):
    for the dag.test() drills, which are about the DAG and the data, not spark-submit (8-15 s of JVM a task)."""
    from kafka_dr.airflow.operators.spark_job import SparkJobOperator  # not at import: AIRFLOW_HOME is set first

    monkeypatch.setattr(SparkJobOperator, "submit", submit_in_process)


@pytest.fixture(scope="module")
def own_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """A stack of the module's own, for tests that stop, wipe or redirect its clusters."""
    with running_stack(tmp_path_factory.mktemp("own-stack")) as running:
        yield running.local


@pytest.fixture(scope="module")
def airflow_execution_api(airflow_db: Path) -> Iterator[dict[str, str]]:
    """An execution API server for task processes, per module: started in about 6 s, for the two modules that run
    DAGs with a process per task (idle it costs little: 0.13 CPU-s a minute, measured 2026-11-28)."""
    with execution_api(SESSION_DIR / "api-server.log") as env:
        yield env


@pytest.fixture
def run_dag_in_processes(airflow_execution_api: dict[str, str]) -> Callable[..., DagRunResult]:
    """`run(dag_id, conf) -> DagRunResult`: one DAG run with every task instance in a process of its own."""

    def run(dag_id: str, conf: dict[str, Any] | None = None, **kwargs: Any) -> DagRunResult:
        return run_dag(dag_id, conf, airflow_execution_api, SESSION_DIR / "dag-runs", **kwargs)

    return run
