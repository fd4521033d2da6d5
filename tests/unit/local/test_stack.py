"""The schema redirect's restart command comes from the topology: the local topology (include/topology.yaml) names
the local stack's `kafka-dr-dev local restart-registry`, which finds the stack wherever it was brought up: the
command runs in an Airflow task, whose working directory is not the terminal's that ran `kafka-dr-dev local up
--data-dir DIR`."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_dr.paths import DEFAULT_TOPOLOGY, LOCAL_DATA_DIR
from kafka_dr.schema_registry import RegistryError, restart_command
from kafka_dr.topology import load_topology
from kafka_dr_dev import cli
from kafka_dr_dev.local.stack import LocalStack, record_data_dir

NO_RESTART = """clusters:
  dc1: {bootstrap_servers: "127.0.0.1:9091", schema_registry: "http://127.0.0.1:8081"}
  dc2: {bootstrap_servers: "127.0.0.1:9092", schema_registry: "http://127.0.0.1:8082"}
flows: []
schema_registry: {primary: dc1}
"""


@pytest.fixture
def restarted_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The data dirs of the stacks whose registry the CLI restarts (the restart itself left out)."""
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    stacks: list[Path] = []

    def restart_registry(stack: LocalStack, dc: str, **_settings: object):
        stacks.append(stack.data_dir)
        return stack.config.dc(dc)

    monkeypatch.setattr(LocalStack, "restart_registry", restart_registry)
    return stacks


def test_the_local_topology_restarts_a_registry_through_the_local_cli() -> None:
    command = restart_command(load_topology(DEFAULT_TOPOLOGY), "dc2", "dc2", True)
    assert command[:6] == [
        "kafka-dr-dev",
        "local",
        "restart-registry",
        "dc2",
        "--registry-url",
        "http://127.0.0.1:8082",
    ]
    assert command[-4:] == ["--kafkastore", "127.0.0.1:9092", "--leader-eligible", "true"]


def test_the_local_restart_runs_on_the_stack_that_serves_the_registry(restarted_on, tmp_path: Path) -> None:
    record_data_dir(tmp_path / "elsewhere", ["http://127.0.0.1:8081", "http://127.0.0.1:8082"])
    record_data_dir(tmp_path / "another", ["http://127.0.0.1:18081"])  # a stack on other ports, brought up later
    command = restart_command(load_topology(DEFAULT_TOPOLOGY), "dc2", "dc2", True)
    assert cli.main(command[1:]) == 0
    assert restarted_on == [tmp_path / "elsewhere"]


def test_with_no_stack_brought_up_it_is_the_default_data_dir(restarted_on) -> None:
    assert cli.main(restart_command(load_topology(DEFAULT_TOPOLOGY), "dc1", "dc1", False)[1:]) == 0
    assert restarted_on == [LOCAL_DATA_DIR.absolute()]


def test_the_stack_is_named_by_its_data_dir_or_its_registry_not_both(restarted_on, capsys) -> None:
    argv = ["local", "restart-registry", "dc1", "--data-dir", "x", "--registry-url", "http://127.0.0.1:8081"]
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2 and restarted_on == []
    assert capsys.readouterr().err.count("\n") == 1


def test_a_topology_without_a_restart_command_cannot_redirect(tmp_path: Path) -> None:
    """Product code has no default restart: the embedded stack's is the local topology's."""
    path = tmp_path / "topology.yaml"
    path.write_text(NO_RESTART)
    with pytest.raises(RegistryError, match=r"^the topology has no schema_registry.restart_command to restart the dc2"):
        restart_command(load_topology(path), "dc2", "dc2", True)
