"""The Spark driver's class-data archive (driver_jvm.py), made once per installation by `python -m
kafka_dr.spark.class_archive` (`make venv` does, about 15 s): one spark-submit of this file that starts a context and
runs a Python job, as a job's driver does first, with -XX:ArchiveClassesAtExit.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

# Absolute imports: spark-submit runs this file as a script (make_archive).
from kafka_dr.spark.driver_jvm import C1_ONLY, DRIVER_OPTIONS, archive_path
from kafka_dr.spark.session import start_spark, stop_spark
from kafka_dr.spark.submit import spark_env, submit_command


def make_archive() -> Path:
    """Make this installation's archive (a no-op when it exists): a context and one Python job under
    spark-submit, whose JVM writes the classes it loaded as it exits."""
    archive = archive_path()
    if archive is None:
        raise RuntimeError("no java found (JAVA_HOME or PATH): nothing to archive")
    if archive.exists():
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=archive.parent) as tmp:
        partial = Path(tmp) / archive.name
        command = submit_command(
            Path(__file__), ["--exercise"], conf={DRIVER_OPTIONS: f"{C1_ONLY} -XX:ArchiveClassesAtExit={partial}"}
        )
        done = subprocess.run(command, env=spark_env(), capture_output=True, text=True, timeout=300)
        if done.returncode != 0 or not partial.exists():
            raise RuntimeError(f"spark-submit exited {done.returncode}: {done.stderr.strip()[-2000:]}")
        partial.replace(archive)  # atomic: a job maps a whole archive or none
    return archive


def _exercise() -> None:
    """What a job's driver does first: start a context, run a Python job on every core."""
    context = start_spark("kafka-dr class archive")
    slots = context.defaultParallelism
    context.parallelize(range(slots), slots).foreach(lambda _: None)
    stop_spark()


if __name__ == "__main__":
    if sys.argv[1:] == ["--exercise"]:  # run by spark-submit, from make_archive
        _exercise()
    else:
        print(f"Spark driver class archive: {make_archive()}")
