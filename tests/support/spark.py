"""Running the Spark jobs of spark_jobs/ from tests: as spark-submit (the command-line contract: exit code, JSON
summary line, --report) or in this process on one Spark session shared by the whole test session, which saves
a JVM and Python workers' start-up (8-15 s) per job run.

Both run the job's own `main`, so error mapping and the summary are the same; in process, the job finds the
shared session active and leaves it running (kafka_dr.jobs.start_spark).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import subprocess
import time
from types import ModuleType
from typing import Any

from kafka_dr.paths import SPARK_JOBS
from kafka_dr.replication.copier import close_clients
from kafka_dr.spark_env import spark_env, spark_submit_command
from kafka_dr.translation.offsets import close_readers

JOB_TIMEOUT = 300.0


JobResult = tuple[int, dict[str, Any], str]  # exit code, the JSON summary (last stdout line), stderr


def submit(job: str, *args: str, timeout: float = JOB_TIMEOUT) -> JobResult:
    """`spark-submit spark_jobs/<job>.py ARGS` in local mode, to its end."""
    started = time.monotonic()
    proc = subprocess.run(
        spark_submit_command(job, list(args)), env=spark_env(), capture_output=True, text=True, timeout=timeout
    )
    print(f"spark-submit {job} {' '.join(args)}: exit {proc.returncode} in {time.monotonic() - started:.1f}s")
    return proc.returncode, last_json_line(proc.stdout), proc.stderr


def submit_in_background(job: str, *args: str, **popen: Any) -> subprocess.Popen[str]:
    """`spark-submit spark_jobs/<job>.py ARGS` started and left running (for kills, races, continuous mode)."""
    return subprocess.Popen(spark_submit_command(job, list(args)), env=spark_env(), text=True, **popen)


def run_in_process(job: str, *args: str) -> JobResult:
    """The job's `main(ARGS)` in this process, on the active Spark session (see the `spark` fixture)."""
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = job_module(job).main(list(args))
    print(f"{job} {' '.join(args)} (in process): exit {code} in {time.monotonic() - started:.1f}s")
    return code, last_json_line(out.getvalue()), err.getvalue()


_modules: dict[str, ModuleType] = {}


def job_module(job: str) -> ModuleType:
    """spark_jobs/<job>.py as a module (spark_jobs/ is scripts for spark-submit, not a package)."""
    if job not in _modules:
        spec = importlib.util.spec_from_file_location(f"kdr_job_{job}", SPARK_JOBS / f"{job}.py")
        assert spec is not None and spec.loader is not None, job
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _modules[job] = module
    return _modules[job]


def last_json_line(stdout: str) -> dict[str, Any]:
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else {}


def local_session() -> Any:
    """A local[2] Spark session for this process (the jobs' own settings: no UI, warnings only)."""
    os.environ.update(spark_env())
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("kafka-dr tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    return session


def close_cached_clients() -> None:
    """Close the clients that copies and translations run in this process keep per worker (before their brokers
    go away)."""
    close_clients()
    close_readers()
