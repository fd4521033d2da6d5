"""The docs/design.md job contract, shared by the three Spark jobs through kafka_dr.spark.job.job_main: a malformed
client settings variable is bad input (exit 2), named in the JSON summary that ends standard output and
fills --report, and its value (a secret) is shown nowhere. No broker is needed: the settings are read
before any connection. Real spark-submit processes: this is the command-line contract. And a job run in
process (as most tests run them) leaves the caller's Spark session running."""

from __future__ import annotations

import json
import subprocess

import pytest
from pyspark.sql import SparkSession
from support.spark import run_in_process, submit_in_background
from support.topology import write_topology

from kafka_dr.spark.driver_jvm import archive_path
from kafka_dr.spark.submit import spark_env, submit_command

pytestmark = pytest.mark.integration  # real spark-submit processes, and the Spark session

JOBS = ("replicate", "translate_offsets", "verify")
SECRET = "hunter2"


def test_malformed_cluster_settings_are_bad_input_named_without_their_value(tmp_path, monkeypatch):
    topology = write_topology(
        tmp_path / "topology.yaml",
        {"dc1": "127.0.0.1:1", "dc2": "127.0.0.1:1"},
        "  - {name: f, source: dc1, target: dc2, topics: {include: ['t']}}",
    )
    monkeypatch.setenv("KDR_CLUSTER_DC1_CONFIG", '{"sasl.password": "' + SECRET + '",')
    procs = {
        job: submit_in_background(
            job,
            "--topology",
            str(topology),
            "--flow",
            "f",
            "--report",
            str(tmp_path / f"{job}.json"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for job in JOBS
    }
    try:
        outputs = {job: proc.communicate(timeout=180) for job, proc in procs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for job, (out, err) in outputs.items():
        assert procs[job].returncode == 2, f"{job}: exit {procs[job].returncode}\n{err[-3000:]}"
        last = out.splitlines()[-1]
        summary = json.loads(last)
        assert summary["status"] == "failed" and summary["flow"] == "f", (job, summary)
        assert summary["error"].startswith("KDR_CLUSTER_DC1_CONFIG: not a JSON object"), (job, summary)
        assert (tmp_path / f"{job}.json").read_text() == last + "\n", job
        assert SECRET not in out and SECRET not in err and "Traceback" not in out + err, job
    assert json.loads(outputs["replicate"][0].splitlines()[-1])["mode"] == "bounded"


def test_a_job_run_in_process_leaves_the_callers_spark_session_running(spark, broker_pair, tmp_path):
    """kafka_dr.spark.session stops only a Spark session it started: the tests' shared session outlives each job."""
    topology = write_topology(
        tmp_path / "topology.yaml",
        {"dc1": broker_pair.dc1.bootstrap, "dc2": broker_pair.dc2.bootstrap},
        "  - {name: idle, source: dc1, target: dc2, topics: {include: ['no-such-topic']}}",
    )
    code, summary, err = run_in_process("verify", "--topology", str(topology), "--flow", "idle")
    # The job ran its Spark tasks to a verdict. Which verdict depends on the heartbeats that other tests left on
    # dc1, since every flow also copies the source's `_kdr.heartbeats`.
    assert code in (0, 1) and "error" not in summary and "expected" in summary, (summary, err[-2000:])
    assert SparkSession.getActiveSession() is spark
    assert spark.sparkContext.parallelize([1, 2]).sum() == 3  # its context still runs jobs


PROBE_APP = """
import json
from kafka_dr.spark.session import start_spark
context = start_spark("probe")
import pyspark  # as the jobs do, after start_spark
workers = context.parallelize(range(2), 2).map(lambda _: __import__("pyspark").__file__).collect()
runtime = context._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
print(json.dumps({"driver": pyspark.__file__, "workers": workers, "jvm": list(runtime.getInputArguments())}))
context.stop()
"""


def test_a_jobs_driver_and_workers_start_from_compiled_pyspark_and_the_tuned_driver_jvm(tmp_path):
    """Under spark-submit, a job's driver and its local workers import the installed pyspark, not its zip
    (kafka_dr.spark.installed_pyspark, kafka_dr.spark.daemon), and the driver JVM has driver_jvm's options: C1
    only, and the installation's class archive, which `make venv` made."""
    app = tmp_path / "probe.py"
    app.write_text(PROBE_APP)
    loaded = tmp_path / "classes.log"  # where the driver JVM loaded each class from (it runs spark-submit's options)
    env = {**spark_env(), "SPARK_SUBMIT_OPTS": f"-Xlog:class+load=info:file={loaded}"}
    done = subprocess.run(submit_command(app, []), env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert ".zip" not in found["driver"] and not any(".zip" in path for path in found["workers"]), found
    archive = archive_path()
    no_archive = "no class archive: `make venv` runs python -m kafka_dr.spark.class_archive"
    assert archive is not None and archive.exists(), no_archive
    assert "-XX:TieredStopAtLevel=1" in found["jvm"] and f"-XX:SharedArchiveFile={archive}" in found["jvm"], found
    # Mapped, not only named: the JVM silently starts without an archive whose jars changed on disk.
    assert "org.apache.spark.SparkContext source: shared objects file" in loaded.read_text(), "archive not mapped"
