"""What a job's Spark driver starts with: the driver JVM's start-up options (kafka_dr.spark.driver_jvm) and pyspark
imported from its installed files rather than its zip (kafka_dr.spark.installed_pyspark). The real spark-submit
is in tests/integration/test_job_contract.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafka_dr.spark import driver_jvm
from kafka_dr.spark.installed_pyspark import prefer_installed_pyspark
from kafka_dr.spark.submit import spark_submit_command


def test_the_driver_gets_c1_only_and_maps_the_archive_when_it_exists(tmp_path, monkeypatch):
    archive = tmp_path / "spark-driver-0123.jsa"
    monkeypatch.setattr(driver_jvm, "archive_path", lambda: archive)
    assert driver_jvm.with_driver_jvm({"spark.cores.max": "2"}) == {
        "spark.cores.max": "2",
        driver_jvm.DRIVER_OPTIONS: "-XX:TieredStopAtLevel=1",
    }
    archive.write_bytes(b"made by make_archive")
    assert driver_jvm.with_driver_jvm()[driver_jvm.DRIVER_OPTIONS] == (
        f"-XX:TieredStopAtLevel=1 -XX:SharedArchiveFile={archive}"
    )


def test_a_job_given_its_own_driver_options_keeps_them(tmp_path, monkeypatch):
    archive = tmp_path / "spark-driver-0123.jsa"
    archive.write_bytes(b"made by make_archive")
    monkeypatch.setattr(driver_jvm, "archive_path", lambda: archive)
    own = {driver_jvm.DRIVER_OPTIONS: "-Xmx2g"}
    assert driver_jvm.with_driver_jvm(own) == own
    command = spark_submit_command("verify", [], conf=own)
    assert f"{driver_jvm.DRIVER_OPTIONS}=-Xmx2g" in command
    assert not any("SharedArchiveFile" in part for part in command)


def test_the_archive_name_follows_the_jvm(tmp_path, monkeypatch):
    first = driver_jvm.archive_path()
    other = tmp_path / "jdk" / "bin" / "java"
    other.parent.mkdir(parents=True)
    other.write_text("#!/bin/sh\n")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    second = driver_jvm.archive_path()
    assert first is not None and second is not None
    assert first.parent == second.parent and first.name != second.name


def test_the_archive_name_follows_the_jars_on_disk(tmp_path, monkeypatch):
    """A reinstalled pyspark has the same jar names but new files, which the JVM would refuse to map an old archive
    for: the name changes with a jar's time and size."""
    import pyspark

    jar = tmp_path / "pyspark" / "jars" / "spark-core.jar"
    jar.parent.mkdir(parents=True)
    jar.write_bytes(b"classes")
    monkeypatch.setattr(pyspark, "__file__", str(tmp_path / "pyspark" / "__init__.py"))
    names = [driver_jvm.archive_path()]
    os.utime(jar, ns=(jar.stat().st_atime_ns, jar.stat().st_mtime_ns + 1_000_000_000))
    names.append(driver_jvm.archive_path())
    jar.write_bytes(b"more classes")
    names.append(driver_jvm.archive_path())
    assert None not in names and len(set(names)) == 3, names


def _pip_pyspark(root: Path) -> tuple[str, str]:
    """A site-packages holding a pip-installed pyspark, whose SPARK_HOME (the package) has its python/lib zip."""
    package = root / "site-packages" / "pyspark"
    (package / "python" / "lib").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "python" / "lib" / "pyspark.zip").write_bytes(b"")
    return str(root / "site-packages"), str(package / "python" / "lib" / "pyspark.zip")


def test_the_pip_packages_own_zip_leaves_the_path(tmp_path):
    site, own_zip = _pip_pyspark(tmp_path)
    py4j_zip = own_zip.replace("pyspark.zip", "py4j-0.10.9.9-src.zip")
    path = [own_zip, py4j_zip, "/opt/jobs/kafka_dr.zip", site]
    prefer_installed_pyspark(path)
    assert path == [py4j_zip, "/opt/jobs/kafka_dr.zip", site]


@pytest.mark.parametrize("case", ["distribution", "package not on the path"])
def test_any_other_pyspark_zip_stays(tmp_path, case):
    site, own_zip = _pip_pyspark(tmp_path)
    # A Spark distribution's SPARK_HOME: its zip is the only pyspark there.
    path = ["/opt/spark/python/lib/pyspark.zip", site] if case == "distribution" else [own_zip]
    before = list(path)
    prefer_installed_pyspark(path)
    assert path == before
