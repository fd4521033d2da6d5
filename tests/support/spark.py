"""Running the Spark jobs of spark_jobs/ from tests: as spark-submit (the command-line contract: exit code, JSON
summary line, --report) or in this process on one Spark session shared by the whole test session, which saves
a JVM and Python workers' start-up (8-15 s) per job run.

Both run the job's own `main`, so error mapping and the summary are the same; in process, the job finds the
shared session active and leaves it running (kafka_dr.spark.session.start_spark).

`standalone_spark` is a real Spark cluster (a standalone master and worker from the installed pyspark) and
`python_without_kafka_dr` a Python for its executors that has the dependencies but not the project.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import site
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from kafka_dr.paths import SPARK_JOBS
from kafka_dr.replication.copier import close_clients
from kafka_dr.spark.submit import spark_env, spark_submit_command
from kafka_dr.translation.offsets import close_readers

from .ports import free_ports
from .servers import ServerProcess

JOB_TIMEOUT = 300.0


JobResult = tuple[int, dict[str, Any], str]  # exit code, the JSON summary (last stdout line), stderr


def submit(
    job: str, *args: str, timeout: float = JOB_TIMEOUT, master: str = "local[2]", conf: dict[str, str] | None = None
) -> JobResult:
    """`spark-submit spark_jobs/<job>.py ARGS` (local mode unless `master` says otherwise), to its end."""
    started = time.monotonic()
    proc = subprocess.run(
        spark_submit_command(job, list(args), master, conf),
        env=spark_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
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


def submit_in_process(operator: Any, name: str, args: list[str], env: dict[str, str]) -> int:
    """SparkJobOperator.submit for dag.test() drills: the operator's job run to its end in this process on the
    active Spark session, with the operator's environment, in place of a spark-submit JVM per task. The arguments,
    exit code and --report summary are the job's own; the spark-submit command itself is proven by the tests that
    keep it (tests/airflow/test_spark_submit_adapter.py, test_replication_operator.py, test_dags_across_processes.py,
    test_spark_standalone.py)."""
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        code, _, err = run_in_process(Path(operator.application).stem, *args)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        close_cached_clients()  # the next job may find a cluster stopped, wiped or restarted
    if code != 0:
        operator.log.error("%s exited %s: %s", name, code, err[-3000:])
    return code


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


def topic_total(summary: dict[str, Any], topic: str, field: str = "records") -> int:
    """`field` summed over the partitions of `topic` in a job's summary: a flow also copies `_kdr.heartbeats`, whose
    count depends on timing and on what other tests of a shared stack sent."""
    return sum(p[field] for p in summary["partitions"] if p["topic"] == topic)


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


def close_worker_clients(session: Any) -> None:
    """The same in the Python workers of `session`'s Spark, which jobs run in process leave behind: a cached client
    of a broker since stopped reconnects several times a second for as long as its worker lives (about a tenth of
    a core per worker, measured). Two tasks per core, each holding its worker a moment, reach every worker of a
    pool that local mode's concurrency keeps at one per core."""

    def close(_: int) -> None:  # pickled by value: the workers import kafka_dr, not the tests' support package
        from kafka_dr.replication.copier import close_clients
        from kafka_dr.translation.offsets import close_readers

        close_clients()
        close_readers()
        time.sleep(0.1)  # the other tasks of the round go to the other workers

    context = session.sparkContext
    tasks = 2 * context.defaultParallelism
    context.parallelize(range(tasks), tasks).foreach(close)


class SparkDaemon(ServerProcess):
    """A Spark standalone master or worker, run by pyspark's own `spark-class`, on 127.0.0.1 (SPARK_LOCAL_IP, from
    spark_env, also binds its web UI there)."""

    def __init__(self, name: str, log_dir: Path, arguments: list[str], web_port: int) -> None:
        super().__init__(name, log_dir)
        self.arguments = arguments
        self.web_port = web_port

    def command(self) -> list[str]:
        return [str(Path(sys.executable).parent / "spark-class"), *self.arguments]

    def state(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.web_port}/json/", timeout=2) as response:
            return json.loads(response.read())

    def ready(self) -> bool:
        self.state()
        return True


@dataclass
class StandaloneSpark:
    """A Spark standalone cluster of one master and one worker; `master_url` is what --master takes."""

    master: SparkDaemon
    worker: SparkDaemon
    master_url: str

    def alive_workers(self) -> int:
        return sum(w.get("state") == "ALIVE" for w in self.master.state().get("workers", []))


@contextlib.contextmanager
def standalone_spark(root: Path, cores: int = 4, memory: str = "4g") -> Iterator[StandaloneSpark]:
    """Master and worker from the installed pyspark, bound to 127.0.0.1, stopped afterwards. Each application gets
    one core unless it asks for more (spark.deploy.defaultCores), so continuous replicators and the jobs beside
    them share the worker's `cores` instead of the first application taking them all. The worker's executors run
    in `root`/work, not in the project."""
    os.environ.update(spark_env())  # SPARK_HOME, PATH and SPARK_LOCAL_IP for spark-class, as for spark-submit
    master_port, master_web, worker_web = free_ports(3)
    master_url = f"spark://127.0.0.1:{master_port}"
    daemon_opts = os.environ.get("SPARK_DAEMON_JAVA_OPTS")
    os.environ["SPARK_MASTER_OPTS"] = "-Dspark.deploy.defaultCores=1"
    os.environ["SPARK_DAEMON_JAVA_OPTS"] = "-XX:TieredStopAtLevel=1"  # as the tests' drivers (tests/conftest.py)
    master = SparkDaemon(
        "spark-master",
        root,
        [
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(master_port),
            "--webui-port",
            str(master_web),
        ],
        master_web,
    )
    worker = SparkDaemon(
        "spark-worker",
        root,
        [
            "org.apache.spark.deploy.worker.Worker",
            master_url,
            "--host",
            "127.0.0.1",
            "--webui-port",
            str(worker_web),
            "--cores",
            str(cores),
            "--memory",
            memory,
            "--work-dir",
            str(root / "work"),
        ],
        worker_web,
    )
    cluster = StandaloneSpark(master, worker, master_url)
    try:
        master.start()
        worker.start()
        master.wait_until(lambda: cluster.alive_workers() == 1, "joined by its worker", timeout=60)
        yield cluster
    finally:
        worker.stop()
        master.stop()
        os.environ.pop("SPARK_MASTER_OPTS", None)
        if daemon_opts is None:
            os.environ.pop("SPARK_DAEMON_JAVA_OPTS", None)
        else:
            os.environ["SPARK_DAEMON_JAVA_OPTS"] = daemon_opts


def python_without_kafka_dr(root: Path) -> Path:
    """A Python with this venv's packages but not kafka_dr: a venv whose site-packages names this venv's as a
    plain path (a .pth line adds the folder without reading the .pth files in it, so the editable install of
    kafka_dr is not seen). What a cluster's executors have: the dependencies, not the project."""
    venv = root / "executor-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    (own_site,) = [Path(p) for p in site.getsitepackages() if p.endswith("site-packages")]
    found = subprocess.run(
        [str(python), "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True, text=True, check=True
    )
    (Path(found.stdout.strip()) / "kdr_dependencies.pth").write_text(f"{own_site}\n")
    probe = subprocess.run(
        [str(python), "-c", "import confluent_kafka, pyspark\nimport kafka_dr"],
        capture_output=True,
        text=True,
        cwd=root,
    )
    assert "No module named 'kafka_dr'" in probe.stderr, f"{python} should see the dependencies only: {probe}"
    return python
