"""The schema redirect's default restart finds the local stack wherever it was brought up: the command runs in an
Airflow task, whose working directory is not the terminal's that ran `kafka-dr local up --data-dir DIR`."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_dr.local.stack import record_data_dir
from kafka_dr.paths import LOCAL_DATA_DIR
from kafka_dr.schema_registry import restart_command
from kafka_dr.topology import load_topology

TOPOLOGY = """clusters:
  dc1: {bootstrap_servers: "127.0.0.1:9091", schema_registry: "http://127.0.0.1:8081"}
  dc2: {bootstrap_servers: "127.0.0.1:9092", schema_registry: "http://127.0.0.1:8082"}
flows: []
schema_registry: {primary: dc1}
"""


@pytest.fixture
def topology(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    path = tmp_path / "topology.yaml"
    path.write_text(TOPOLOGY)
    return load_topology(path)


def data_dir_of(command: list[str]) -> str:
    return command[command.index("--data-dir") + 1]


def test_the_default_restart_runs_on_the_stack_that_serves_the_registry(topology, tmp_path: Path) -> None:
    record_data_dir(tmp_path / "elsewhere", ["http://127.0.0.1:8081", "http://127.0.0.1:8082"])
    record_data_dir(tmp_path / "another", ["http://127.0.0.1:18081"])  # a stack on other ports, brought up later
    command = restart_command(topology, "dc2", "dc2", True)
    assert data_dir_of(command) == str(tmp_path / "elsewhere")
    assert command[-4:] == ["--kafkastore", "127.0.0.1:9092", "--leader-eligible", "true"]


def test_with_no_stack_brought_up_it_is_the_default_data_dir(topology) -> None:
    assert data_dir_of(restart_command(topology, "dc1", "dc1", False)) == str(LOCAL_DATA_DIR.absolute())
