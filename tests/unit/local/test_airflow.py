"""`kafka-dr-dev airflow`'s launcher without starting Airflow: its environment, its secrets, its status of components
that do not run, and a second `up` on another port refused before anything changes."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from kafka_dr import processes
from kafka_dr.topology import parse_topology
from kafka_dr_dev.local.airflow import APPROVER, APPROVER_PASSWORD, COMPONENTS, USER, LocalAirflow
from kafka_dr_dev.local.stack import StackError


@pytest.fixture
def local_airflow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LocalAirflow:
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    return LocalAirflow(port=18080)


def test_the_environment_points_airflow_at_the_project_and_keeps_its_secrets_in_a_private_file(
    local_airflow: LocalAirflow, tmp_path: Path
) -> None:
    env = local_airflow.environment()
    assert env["AIRFLOW_HOME"] == str(tmp_path / "state" / "airflow")
    assert env["AIRFLOW__CORE__DAGS_FOLDER"].endswith("/dags") and env["AIRFLOW__CORE__LOAD_EXAMPLES"] == "False"
    assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor" and env["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://127.0.0.1:18080/execution/"
    secrets = local_airflow.home / "secrets.json"
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o600
    assert json.loads(secrets.read_text())["jwt_secret"] == env["AIRFLOW__API_AUTH__JWT_SECRET"]
    assert local_airflow.environment()["AIRFLOW__API_AUTH__JWT_SECRET"] == env["AIRFLOW__API_AUTH__JWT_SECRET"]


def test_the_scheduler_passes_every_quarter_second_unless_the_environment_says_otherwise(
    local_airflow: LocalAirflow, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert local_airflow.environment()["AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME"] == "0.25"
    monkeypatch.setenv("AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME", "1")
    assert local_airflow.environment()["AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME"] == "1"


def test_two_users_so_that_one_can_approve_what_the_other_triggered(local_airflow: LocalAirflow) -> None:
    local_airflow.home.mkdir(parents=True)
    (local_airflow.home / "passwords.json").write_text(json.dumps({USER: "kept"}))  # a home made before the approver
    env = local_airflow.environment()
    assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] == f"{USER}:admin,{APPROVER}:admin"
    passwords = Path(env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"])
    assert json.loads(passwords.read_text()) == {USER: "kept", APPROVER: APPROVER_PASSWORD}
    assert stat.S_IMODE(passwords.stat().st_mode) == 0o600


def test_status_of_an_airflow_that_never_started(local_airflow: LocalAirflow) -> None:
    statuses = local_airflow.status()
    assert [(s.name, s.pid, s.healthy, s.detail) for s in statuses] == [
        (name, None, False, "not running") for name in COMPONENTS
    ]


def test_up_on_another_port_than_the_running_one_is_refused_before_anything_changes(
    local_airflow: LocalAirflow, tmp_path: Path
) -> None:
    run = local_airflow.home / "run"
    run.mkdir(parents=True)
    # This test's own process stands for a running api-server started on port 18080.
    processes.write_atomic(
        local_airflow.pid_file("api-server"), f"{os.getpid()} {processes.start_ticks(os.getpid())}\n"
    )
    processes.write_atomic(run / "port", "18080\n")
    topology = parse_topology({"clusters": {"dc1": {"bootstrap_servers": "127.0.0.1:1"}}, "flows": []})
    refused = r"^Airflow runs on port 18080 with the local executor; stop it with `kafka-dr-dev airflow down` first$"
    for other in (LocalAirflow(port=18081), LocalAirflow(port=18080, executor="celery")):
        with pytest.raises(StackError, match=refused):
            other.up(topology, tmp_path / "topology.yaml")
    assert sorted(p.name for p in run.iterdir()) == ["airflow.lock", "api-server.pid", "port"]
    assert not (local_airflow.home / "airflow.db").exists()


def test_the_celery_executor_adds_a_broker_and_two_workers_each_a_host_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    celery = LocalAirflow(port=18080, executor="celery")
    assert celery.components == ("redis", "worker-1", "worker-2", *COMPONENTS)
    (celery.home / "run").mkdir(parents=True)
    (celery.home / "run" / "redis-port").write_text("16379\n")
    env = celery.environment()
    assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    assert env["AIRFLOW__CELERY__BROKER_URL"] == "redis://127.0.0.1:16379/0"
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    worker = celery._command("worker-2")
    assert worker[:6] == ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--uts"]
    assert worker[-1].startswith("hostname worker-2 && exec ") and "--celery-hostname worker-2@%h" in worker[-1]
    assert LocalAirflow(port=18080).executor == "local"  # what `up` recorded is used only once it ran
    with pytest.raises(StackError, match="executor 'kubernetes': one of local, celery"):
        LocalAirflow(executor="kubernetes")
