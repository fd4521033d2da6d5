"""The apache-spark provider's private parts that kafka_dr.airflow.hooks.spark_submit relies on are still there
and mean the same: a provider upgrade that changes them fails here, naming the part, instead of in a DAG run."""

from __future__ import annotations

import inspect
import os
import subprocess
from importlib.metadata import version
from pathlib import Path

import pytest
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk.exceptions import AirflowException

from kafka_dr.airflow.hooks.spark_submit import exit_code, submit_command
from kafka_dr.airflow.operators.spark_job import SparkJobOperator
from kafka_dr.spark.driver_jvm import DRIVER_OPTIONS, with_driver_jvm

PROVIDER = f"apache-airflow-providers-apache-spark {version('apache-airflow-providers-apache-spark')}"
ADAPTER = "include/kafka_dr/airflow/hooks/spark_submit.py"


def hook(name: str = "kdr-adapter-test", args: tuple[str, ...] = ("--flow", "f")) -> SparkSubmitHook:
    """The hook as the operators build it, on the harness's spark_default (local[2], deploy mode client)."""
    operator = SparkJobOperator(task_id="adapter", application="job.py", conf={"spark.ui.enabled": "false"})
    return operator.spark_hook(name, list(args))


def test_build_spark_submit_command_keeps_its_signature() -> None:
    method = getattr(SparkSubmitHook, "_build_spark_submit_command", None)
    assert callable(method), f"{PROVIDER}: SparkSubmitHook._build_spark_submit_command is gone; update {ADAPTER}"
    signature = inspect.signature(method)
    assert list(signature.parameters) == ["self", "application"] and signature.return_annotation in (
        "list[str]",
        list[str],
    ), (
        f"{PROVIDER}: SparkSubmitHook._build_spark_submit_command{signature}, expected "
        f"(self, application: str) -> list[str]; update {ADAPTER}"
    )


def test_the_command_for_a_local_2_connection() -> None:
    driver_options = with_driver_jvm()[DRIVER_OPTIONS]  # the operators add them (kafka_dr.spark.driver_jvm)
    assert submit_command(hook(), "job.py") == [
        "spark-submit",
        "--master",
        "local[2]",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        f"{DRIVER_OPTIONS}={driver_options}",
        "--name",
        "kdr-adapter-test",
        "--deploy-mode",
        "client",
        "job.py",
        "--flow",
        "f",
    ], f"{PROVIDER}: SparkSubmitHook._build_spark_submit_command builds another command; check {ADAPTER}"


def test_submit_sp_keeps_the_spark_submit_process_and_its_exit_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "spark-submit"  # first on PATH: exits 2, as a job does on bad input
    fake.write_text('#!/bin/sh\necho "bad input: $*"\nexit 2\n', encoding="utf-8")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    submitted = hook()
    assert "_submit_sp" in vars(submitted) and exit_code(submitted) is None, (
        f"{PROVIDER}: SparkSubmitHook no longer sets _submit_sp = None in __init__; update {ADAPTER}"
    )
    with pytest.raises(AirflowException):
        submitted.submit("job.py")
    assert isinstance(getattr(submitted, "_submit_sp", None), subprocess.Popen), (
        f"{PROVIDER}: SparkSubmitHook.submit no longer keeps its Popen in _submit_sp; update {ADAPTER}"
    )
    assert exit_code(submitted) == 2, f"{PROVIDER}: SparkSubmitHook._submit_sp lost spark-submit's exit code"


@pytest.mark.integration
def test_without_a_spark_connection_the_jobs_run_in_local_mode_and_the_log_says_so(
    airflow_db: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An Airflow nobody prepared has no spark_default: the provider alone would submit to yarn."""
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_DEFAULT")
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DR_LOCAL_SPARK", "")  # so that the one the operator sets goes at teardown
    monkeypatch.delenv("AIRFLOW_CONN_KAFKA_DR_LOCAL_SPARK")
    command = submit_command(hook(), "job.py")
    assert command[command.index("--master") + 1] == "local[*]"
    assert (
        "Spark master local[*] (no connection spark_default: kafka-dr's default, local mode)" in capsys.readouterr().out
    )


def test_the_log_names_the_master_of_the_connection(capsys: pytest.CaptureFixture[str]) -> None:
    hook()
    assert "Spark master local[2] (connection spark_default)" in capsys.readouterr().out
