"""The JVM options of a job's Spark driver, chosen for start-up: kafka-dr's jobs read and write Kafka in their
Python tasks, so no record passes through the driver JVM, which only plans and schedules, and a job's start-up is
most of what the JVM costs it.

- Only the C1 compiler (-XX:TieredStopAtLevel=1): on 2 cores, C2 compiling Spark's start-up paths competes with
  the start-up itself (context 1.2 -> 0.95 s, first job 0.75 -> 0.6 s here).
- A class-data archive (Java's AppCDS) of the classes a job's driver loads: mapped instead of loaded and verified
  (context 1.5 -> 0.9 s), when one made by the same JVM on the same Spark jars exists. `python -m
  kafka_dr.spark.class_archive` makes it once per installation (`make venv` does, about 15 s). Without one a job
  starts as before.

Executors of a cluster are not touched, and a job given its own driver JVM options keeps them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

DRIVER_OPTIONS = "spark.driver.extraJavaOptions"
C1_ONLY = "-XX:TieredStopAtLevel=1"


def _java() -> Path | None:
    """The java spark-submit starts: $JAVA_HOME/bin/java, else the one on PATH."""
    java = Path(os.environ["JAVA_HOME"]) / "bin" / "java" if os.environ.get("JAVA_HOME") else None
    found = str(java) if java is not None and java.exists() else shutil.which("java")
    return None if found is None else Path(found).resolve()


def archive_path() -> Path | None:
    """Where the archive of this JVM and this pyspark's jars is kept (None without a java), in the user's cache
    ($XDG_CACHE_HOME, else ~/.cache). The JVM maps an archive only for the class path it was made with, so the
    name changes with the java, the jars' folder and each jar's name, size and time: the JVM refuses an archive whose
    jars changed on disk (a reinstalled venv) and silently starts without it, so a job never finds one made before."""
    import pyspark

    java = _java()
    if java is None:
        return None
    jars = Path(pyspark.__file__).parent / "jars"
    stamps = sorted(f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in jars.glob("*.jar"))
    key = "\0".join([str(java), str(java.stat().st_mtime_ns), str(jars), *stamps])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "kafka-dr" / f"spark-driver-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


def with_driver_jvm(conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """`conf` with the driver JVM's start-up options, unless `conf` sets driver JVM options itself."""
    settings = dict(conf or {})
    if DRIVER_OPTIONS not in settings:
        archive = archive_path()
        mapped = [f"-XX:SharedArchiveFile={archive}"] if archive is not None and archive.exists() else []
        settings[DRIVER_OPTIONS] = " ".join([C1_ONLY, *mapped])
    return settings
