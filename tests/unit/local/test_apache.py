"""An Apache Kafka node's command line: the class archive once `make venv` made it, not before; $KAFKA_OPTS."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_dr_dev.local import apache


def jars(folder: Path) -> Path:
    folder.mkdir()
    (folder / f"kafka_2.13-{apache.KAFKA_VERSION}.jar").touch()
    return folder


def test_a_node_maps_its_classes_from_the_archive_beside_the_jars_once_there_is_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(apache.KAFKA_OPTS, raising=False)  # the suite sets it (tests/conftest.py)
    libs = jars(tmp_path / "libs")
    properties, log_config = tmp_path / "server.properties", tmp_path / "log4j2.yaml"
    assert apache.server_command(properties, log_config, libs)[:2] == ["java", *apache.JVM_OPTIONS[:1]]
    (libs / apache.ARCHIVE).touch()
    command = apache.server_command(properties, log_config, libs)
    assert command[:2] == ["java", f"-XX:SharedArchiveFile={libs / apache.ARCHIVE}"]
    assert command[-4:] == ["-cp", f"{libs}/*", apache.SERVER_CLASS, str(properties)]


def test_kafka_opts_reach_every_kafka_jvm_as_words(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """$KAFKA_OPTS, as Kafka's start scripts take it: split into words (quotes kept together), after the archive."""
    monkeypatch.setenv(apache.KAFKA_OPTS, "-XX:TieredStopAtLevel=1 '-Dkdr.note=two words'")
    libs = jars(tmp_path / "libs")
    (libs / apache.ARCHIVE).touch()
    command = apache.server_command(tmp_path / "server.properties", tmp_path / "log4j2.yaml", libs)
    assert command[:4] == [
        "java",
        f"-XX:SharedArchiveFile={libs / apache.ARCHIVE}",
        "-XX:TieredStopAtLevel=1",
        "-Dkdr.note=two words",
    ]
