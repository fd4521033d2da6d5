"""An Apache Kafka node's command line: the class archive is used once `make venv` made it, and not before."""

from __future__ import annotations

from pathlib import Path

from kafka_dr.local import apache


def jars(folder: Path) -> Path:
    folder.mkdir()
    (folder / f"kafka_2.13-{apache.KAFKA_VERSION}.jar").touch()
    return folder


def test_a_node_maps_its_classes_from_the_archive_beside_the_jars_once_there_is_one(tmp_path: Path) -> None:
    libs = jars(tmp_path / "libs")
    properties, log_config = tmp_path / "server.properties", tmp_path / "log4j2.yaml"
    assert apache.server_command(properties, log_config, libs)[:2] == ["java", *apache.JVM_OPTIONS[:1]]
    (libs / apache.ARCHIVE).touch()
    command = apache.server_command(properties, log_config, libs)
    assert command[:2] == ["java", f"-XX:SharedArchiveFile={libs / apache.ARCHIVE}"]
    assert command[-4:] == ["-cp", f"{libs}/*", apache.SERVER_CLASS, str(properties)]
