"""KafkaClusterHook: bootstrap from the topology, security from an Airflow connection or the environment, secrets
kept out of logs, and a one-line error for an unreachable cluster."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from airflow.sdk.exceptions import AirflowNotFoundException
from support.ports import free_port

from kafka_dr.airflow.hooks.kafka_cluster import ClusterUnreachable, KafkaClusterHook, cluster_access
from kafka_dr.clients import LIBRDKAFKA_LOG, ClientConfigError
from kafka_dr.topology import Topology, TopologyError, parse_topology

if TYPE_CHECKING:
    from support.stack import Stack

SECRET = "s3cret-value-never-logged"


def topology(bootstrap: str = "127.0.0.1:9091") -> Topology:
    return parse_topology({"clusters": {"dc1": {"bootstrap_servers": bootstrap}}})


def connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: object) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "kafka_dr", **fields}))


def test_without_a_connection_or_variable_the_cluster_is_plaintext(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KDR_CLUSTER_DC1_CONFIG", raising=False)
    hook = KafkaClusterHook("dc1", topology=topology())
    assert hook.client_config() == {"bootstrap.servers": "127.0.0.1:9091", "logger": LIBRDKAFKA_LOG}
    assert cluster_access(topology()).child_environ() == {}


def test_connection_extras_and_login_become_librdkafka_settings(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    connection(
        monkeypatch,
        "kafka_dr_dc1",
        login="alice",
        password=SECRET,
        extra={"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "ssl.key.password": SECRET},
    )
    monkeypatch.setenv("KDR_CLUSTER_DC1_CONFIG", json.dumps({"client.id": "ignored: the connection wins"}))
    hook = KafkaClusterHook("dc1", topology=topology())
    expected = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "ssl.key.password": SECRET,
        "sasl.username": "alice",
        "sasl.password": SECRET,
    }
    assert hook.client_config(enable_idempotence=True) == {
        "bootstrap.servers": "127.0.0.1:9091",
        "logger": LIBRDKAFKA_LOG,
        **expected,
        "enable.idempotence": True,
    }
    child = cluster_access(topology()).child_environ()
    assert {k: json.loads(v) for k, v in child.items()} == {"KDR_CLUSTER_DC1_CONFIG": expected}
    logged = "".join(capsys.readouterr())  # Airflow's structlog writes task logs to stdout
    assert "security settings from connection kafka_dr_dc1" in logged and "'sasl.username': 'alice'" in logged
    assert SECRET not in logged


def test_a_named_connection_is_used_and_must_exist(monkeypatch: pytest.MonkeyPatch) -> None:
    connection(monkeypatch, "prod_dc1", extra={"security.protocol": "SSL"})
    assert KafkaClusterHook("dc1", "prod_dc1", topology=topology()).security_settings() == {"security.protocol": "SSL"}
    with pytest.raises(AirflowNotFoundException):
        KafkaClusterHook("dc1", "missing_conn", topology=topology()).security_settings()


def test_the_environment_variable_applies_without_a_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KDR_CLUSTER_DC1_CONFIG", json.dumps({"security.protocol": "SSL"}))
    hook = KafkaClusterHook("dc1", topology=topology())
    assert hook.client_config()["security.protocol"] == "SSL"
    assert cluster_access(topology()).child_environ() == {"KDR_CLUSTER_DC1_CONFIG": '{"security.protocol": "SSL"}'}


def test_bad_settings_are_refused_naming_the_key_not_the_value(monkeypatch: pytest.MonkeyPatch) -> None:
    connection(monkeypatch, "kafka_dr_dc1", extra={"sasl.oauthbearer.config": {"secret": SECRET}})
    with pytest.raises(ClientConfigError, match="^connection kafka_dr_dc1: extra 'sasl.oauthbearer.config' must") as e:
        KafkaClusterHook("dc1", topology=topology()).security_settings()
    assert SECRET not in str(e.value)
    with pytest.raises(TopologyError, match=r"unknown cluster 'dc9' \(known: dc1\)"):
        KafkaClusterHook("dc9", topology=topology())


@pytest.mark.integration
def test_check_reachable_returns_the_cluster_id_or_one_line_naming_the_cluster(stack: Stack) -> None:
    assert KafkaClusterHook("dc1", topology=topology(stack.bootstrap("dc1"))).check_reachable(5)
    address = f"127.0.0.1:{free_port()}"
    with pytest.raises(ClusterUnreachable) as excinfo:
        KafkaClusterHook("dc1", topology=topology(address)).check_reachable(1)
    assert str(excinfo.value).startswith(f"cluster dc1 ({address}) is not reachable: ")
    assert "\n" not in str(excinfo.value)


def test_a_task_s_cluster_access_holds_each_cluster_s_connection_else_its_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What every task hands the core (lag, health, failover, Spark jobs' environment): resolved once, per cluster."""
    topo = parse_topology(
        {"clusters": {"dc1": {"bootstrap_servers": "h:1"}, "dc2": {"bootstrap_servers": "h:2"}}, "flows": []}
    )
    connection(monkeypatch, "kafka_dr_dc1", login="alice", password=SECRET)
    monkeypatch.delenv("AIRFLOW_CONN_KAFKA_DR_DC2", raising=False)
    monkeypatch.setenv("KDR_CLUSTER_DC2_CONFIG", json.dumps({"client.id": "from-the-environment"}))
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_DR_DC2_REGISTRY", json.dumps({"conn_type": "http", "login": "reg", "password": SECRET})
    )
    access = cluster_access(topo)
    assert access.config("dc1")["sasl.username"] == "alice" and access.config("dc1")["sasl.password"] == SECRET
    assert access.config("dc2")["client.id"] == "from-the-environment"
    assert access.registry_headers("dc2")["Authorization"].startswith("Basic ") and access.registry_headers("dc1") == {}
    assert SECRET not in repr(access)
