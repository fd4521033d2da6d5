"""kafka_dr.schema_registry: a registry's basic-auth credentials (from $KDR_REGISTRY_<NAME>_USER_INFO, into the
Authorization header and confluent-kafka's settings, never into a message). The restart the redirect runs comes from
the topology (tests/unit/local/test_stack.py for the local stack's)."""

from __future__ import annotations

import base64

import pytest

from kafka_dr.schema_registry import (
    RegistryError,
    auth_headers,
    client_settings,
    user_info,
    user_info_env_var,
)
from kafka_dr.topology import parse_topology

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
