"""kafka_dr.schema_registry: a registry's basic-auth credentials (from $KDR_REGISTRY_<NAME>_USER_INFO, into the
Authorization header and confluent-kafka's settings, never into a message), and the schema redirect's default restart,
which finds the local stack wherever it was brought up: the command runs in an Airflow task, whose working directory
is not the terminal's that ran `kafka-dr local up --data-dir DIR`."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from support.topology import write_topology

from kafka_dr.local.stack import record_data_dir
from kafka_dr.paths import LOCAL_DATA_DIR
from kafka_dr.schema_registry import (
    RegistryError,
    auth_headers,
    client_settings,
    restart_command,
    user_info,
    user_info_env_var,
)
from kafka_dr.topology import load_topology, parse_topology

TOPOLOGY = parse_topology(
    {
        "clusters": {
            "us-east": {"bootstrap_servers": "127.0.0.1:9091", "schema_registry": "http://127.0.0.1:8081,http://b"},
            "dc2": {"bootstrap_servers": "127.0.0.1:9092"},
        }
    }
)


def test_the_variable_is_named_after_the_cluster():
    assert user_info_env_var("us-east") == "KDR_REGISTRY_US_EAST_USER_INFO"


def test_without_credentials_nothing_is_sent(monkeypatch):
    monkeypatch.delenv("KDR_REGISTRY_US_EAST_USER_INFO", raising=False)
    assert user_info("us-east") is None and auth_headers("us-east") == {}
    assert client_settings(TOPOLOGY, "us-east") == {"url": "http://127.0.0.1:8081"}


def test_credentials_become_the_basic_header_and_the_client_setting(monkeypatch):
    monkeypatch.setenv("KDR_REGISTRY_US_EAST_USER_INFO", "alice:pa:ss")  # a password may hold colons
    token = base64.b64encode(b"alice:pa:ss").decode()
    assert auth_headers("us-east") == {"Authorization": f"Basic {token}"}
    assert client_settings(TOPOLOGY, "us-east") == {
        "url": "http://127.0.0.1:8081",
        "basic.auth.user.info": "alice:pa:ss",
    }
    # An explicit environment (the dashboard's, with the connections' credentials) wins over the process's.
    assert auth_headers("us-east", {}) == {}


def test_a_malformed_value_is_one_line_without_the_value(monkeypatch):
    monkeypatch.setenv("KDR_REGISTRY_US_EAST_USER_INFO", "s3cret-without-user")
    with pytest.raises(RegistryError) as excinfo:
        auth_headers("us-east")
    assert str(excinfo.value) == "KDR_REGISTRY_US_EAST_USER_INFO must be user:password"


def test_a_cluster_without_registry_has_no_client_settings():
    with pytest.raises(RegistryError, match="cluster dc2 has no schema_registry URL"):
        client_settings(TOPOLOGY, "dc2")


@pytest.fixture
def topology(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    clusters = {"dc1": "127.0.0.1:9091", "dc2": "127.0.0.1:9092"}
    registries = {"dc1": "http://127.0.0.1:8081", "dc2": "http://127.0.0.1:8082"}
    extra = "schema_registry: {primary: dc1}"
    return load_topology(write_topology(tmp_path / "topology.yaml", clusters, "flows: []", registries, extra))


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
