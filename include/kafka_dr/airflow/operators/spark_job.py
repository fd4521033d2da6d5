"""Base of the operators that run one of kafka-dr's Spark jobs through the apache-spark provider.

Every job writes its JSON summary to --report and exits 0 done, 1 failed, 2 bad input; a failure becomes
one AirflowException line with the job's own error, not just the provider's "exit code N".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook, BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowNotFoundException

from ...access import ClusterAccess
from ...spark.driver_jvm import with_driver_jvm
from ...spark.submit import is_local, package_zip
from ...topology import Topology
from ..hooks.kafka_cluster import cluster_access
from ..hooks.spark_submit import exit_code, master

if TYPE_CHECKING:  # imported where a hook is made: it costs every task that parses a DAG file about 60 ms
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

EXIT_MEANING = {1: "failed", 2: "bad input"}
LOCAL_SPARK_CONN_ID = "kafka_dr_local_spark"
LOCAL_SPARK_CONNECTION = json.dumps({"conn_type": "spark", "host": "local[*]", "extra": {"deploy-mode": "client"}})


class SparkJobOperator(BaseOperator):
    """:param spark_conn_id: Spark connection giving master and deploy mode
    :param kafka_conn_ids: cluster name -> connection id, for clusters not using `kafka_dr_<cluster>`
    :param application: the job (a path or URL the Spark master can read)
    :param conf: extra Spark configuration
    :param py_files: --py-files; by default the kafka_dr package on a cluster master, nothing in local mode
    """

    def __init__(
        self,
        *,
        application: str,
        spark_conn_id: str = "spark_default",
        kafka_conn_ids: Mapping[str, str] | None = None,
        conf: dict[str, Any] | None = None,
        py_files: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.application = application
        self.spark_conn_id = spark_conn_id
        self.kafka_conn_ids = dict(kafka_conn_ids or {})
        self.conf = conf
        self.py_files = py_files
        self._spark: SparkSubmitHook | None = None

    def on_kill(self) -> None:
        if self._spark is not None:
            self._spark.on_kill()

    def cluster_access(self, topology: Topology) -> ClusterAccess:
        """How this task reaches the clusters (`kafka_conn_ids` naming a cluster's connection when it is not
        `kafka_dr_<cluster>`); the job gets them with `child_environ`, in its environment, never its command line."""
        return cluster_access(topology, self.kafka_conn_ids)

    def spark_hook(self, name: str, args: list[str]) -> SparkSubmitHook:
        """The provider's hook on `spark_conn_id`, or on local mode when that connection does not exist (the
        provider itself would fall back to yarn); the task log says which master and why."""
        conn_id, why = self.spark_conn_id, f"connection {self.spark_conn_id}"
        try:
            BaseHook.get_connection(self.spark_conn_id)
        except AirflowNotFoundException:
            conn_id, why = LOCAL_SPARK_CONN_ID, f"no connection {self.spark_conn_id}: kafka-dr's default, local mode"
            # An environment-variable connection, found by Airflow's own lookup in this task process only.
            os.environ.setdefault(f"AIRFLOW_CONN_{LOCAL_SPARK_CONN_ID.upper()}", LOCAL_SPARK_CONNECTION)
        hook = self._hook(conn_id, name, args, self.py_files)
        spark_master = master(hook)
        self.log.info("Spark master %s (%s)", spark_master, why)
        if self.py_files is None and not is_local(spark_master):
            # Executors of a cluster are other processes: they get the package the driver runs (package_zip).
            package = str(package_zip())
            self.log.info("kafka_dr shipped to the executors as --py-files %s", package)
            hook = self._hook(conn_id, name, args, package)
        return hook

    def _hook(self, conn_id: str, name: str, args: list[str], py_files: str | None) -> SparkSubmitHook:
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        # The driver JVM's start-up options (driver_jvm), unless the operator's conf sets its own.
        conf = with_driver_jvm(self.conf)
        return SparkSubmitHook(conn_id=conn_id, conf=conf, py_files=py_files, name=name, application_args=args)

    def run_job(self, name: str, args: list[str], env: dict[str, str], what: str) -> dict[str, Any]:
        """Submit the job to the end; returns its summary. `what` names the job in errors."""
        with tempfile.TemporaryDirectory(prefix="kdr-job-") as tmp:
            report = Path(tmp) / "summary.json"
            code = self.submit(name, [*args, "--report", str(report)], env)
            if code != 0:
                raise _job_failed(what, code, report)  # its own error is in its summary
            summary = _read_summary(report)
        if summary is None:
            raise AirflowException(f"{what}: {Path(self.application).name} exited 0 without writing its summary")
        return summary

    def submit(self, name: str, args: list[str], env: dict[str, str]) -> int | None:
        """spark-submit the job with `args` to its end through the provider; its exit code (None: unknown)."""
        self._spark = self.spark_hook(name, args)
        try:
            self._spark.submit(self.application, env={**os.environ, **env})
        except AirflowException:
            return exit_code(self._spark) or None  # failed, even when the provider saw exit code 0 (cluster mode)
        return 0

    def run_in_python(self, args: list[str], env: dict[str, str], what: str) -> dict[str, Any]:
        """The job run by plain Python, for a run that starts no Spark context (e.g. applying offsets already
        translated): the same command-line contract, without spark-submit's JVM (5-8 s here)."""
        command = [sys.executable, self.application, *args]
        self.log.info("No Spark needed: %s", " ".join(command))
        with tempfile.TemporaryDirectory(prefix="kdr-job-") as tmp:
            report = Path(tmp) / "summary.json"
            with subprocess.Popen(
                [*command, "--report", str(report)],
                env={**os.environ, **env},
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            ) as process:
                assert process.stdout is not None
                for line in process.stdout:
                    self.log.info("%s", line.rstrip())
            if process.returncode != 0:
                raise _job_failed(what, process.returncode, report)
            summary = _read_summary(report)
        if summary is None:
            raise AirflowException(f"{what}: {Path(self.application).name} exited 0 without writing its summary")
        return summary


def _job_failed(what: str, code: int | None, report: Path) -> AirflowException:
    error = (_read_summary(report) or {}).get("error") or "see the job's output above"
    return AirflowException(f"{what} {EXIT_MEANING.get(code, 'failed')} (exit code {code}): {error}")


def force_args(force: Mapping[str, str | None] | None) -> list[str]:
    """The jobs' --force-* arguments (docs/design.md's filter overrides) from {"cluster", "topic", "from", "to"}."""
    return [f"--force-{key}={value}" for key, value in (force or {}).items() if value is not None]


def _read_summary(report: Path) -> dict[str, Any] | None:
    try:
        return json.loads(report.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
