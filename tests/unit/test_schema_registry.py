"""A registry's basic-auth credentials (kafka_dr.access: from $KDR_REGISTRY_<NAME>_USER_INFO, into the Authorization
header and kafka_dr.schema_registry's confluent-kafka settings, never into a message). The restart the redirect runs
comes from the topology (tests/unit/local/test_stack.py for the local stack's)."""

from __future__ import annotations

import base64

import pytest

from kafka_dr.access import ClusterAccess, user_info, user_info_env_var
from kafka_dr.clients import ClientConfigError
from kafka_dr.schema_registry import RegistryError, client_settings
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
    access = ClusterAccess.from_environ(TOPOLOGY)
    assert user_info("us-east") is None and access.registry_headers("us-east") == {}
    assert client_settings(access, "us-east") == {"url": "http://127.0.0.1:8081"}


def test_credentials_become_the_basic_header_and_the_client_setting(monkeypatch):
    monkeypatch.setenv("KDR_REGISTRY_US_EAST_USER_INFO", "alice:pa:ss")  # a password may hold colons
    token = base64.b64encode(b"alice:pa:ss").decode()
    access = ClusterAccess.from_environ(TOPOLOGY)
    assert access.registry_headers("us-east") == {"Authorization": f"Basic {token}"}
    assert access.child_environ()["KDR_REGISTRY_US_EAST_USER_INFO"] == "alice:pa:ss"  # a restart command's
    assert client_settings(access, "us-east") == {
        "url": "http://127.0.0.1:8081",
        "basic.auth.user.info": "alice:pa:ss",
    }
    # An explicit environment wins over the process's.
    assert ClusterAccess.from_environ(TOPOLOGY, {}).registry_headers("us-east") == {}


def test_a_malformed_value_is_one_line_without_the_value(monkeypatch):
    monkeypatch.setenv("KDR_REGISTRY_US_EAST_USER_INFO", "s3cret-without-user")
    with pytest.raises(ClientConfigError) as excinfo:
        ClusterAccess.from_environ(TOPOLOGY)
    assert str(excinfo.value) == "KDR_REGISTRY_US_EAST_USER_INFO must be user:password"


def test_a_cluster_without_registry_has_no_client_settings():
    with pytest.raises(RegistryError, match="cluster dc2 has no schema_registry URL"):
        client_settings(ClusterAccess(TOPOLOGY), "dc2")


@pytest.mark.parametrize(
    "command, reason",
    [("sleep 5", "timed out after 0.3 seconds"), ("/nonexistent/restart-registry {cluster}", "No such file")],
)
def test_a_restart_command_that_never_returns_or_cannot_run_is_one_line(command, reason):
    """The redirect's restart fails with its one line (the runbook's section names it by "restart of the"), not a
    traceback: a command still running after the timeout, or one that is not there."""
    from kafka_dr.schema_registry import redirect

    topology = parse_topology(
        {
            "clusters": {"dc1": {"bootstrap_servers": "127.0.0.1:1", "schema_registry": "http://127.0.0.1:1"}},
            "schema_registry": {"primary": "dc1", "restart_command": command},
        }
    )
    with pytest.raises(RegistryError, match=f"^restart of the dc1 registry failed \\(.*\\): .*{reason}") as error:
        redirect(ClusterAccess(topology), "dc1", "dc1", True, timeout=0.3)
    assert "\n" not in str(error.value)
