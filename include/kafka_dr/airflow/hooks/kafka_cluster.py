"""Kafka client settings for one cluster of the topology, with security taken from an Airflow connection.

The topology file says where a cluster is; the connection `kafka_dr_<cluster>` says how to log in:
its extras are librdkafka settings ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", ...}),
its login/password become sasl.username/sasl.password (any connection type will do, e.g. Generic).
Without that connection the cluster's KDR_CLUSTER_<NAME>_CONFIG variable applies (none on the local
stack). Spark jobs get the same settings through their environment (`env_for_subprocess`), never on a
command line, and nothing secret is logged.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from ... import clients
from ...topology import Cluster, Topology, load_topology

LOGIN_ERRORS = (KafkaError._AUTHENTICATION, KafkaError._SSL)  # what no retry fixes: wrong credentials or trust


class ClusterUnreachable(RuntimeError):
    """A cluster did not answer; one line naming the cluster, its bootstrap address and why."""


def default_conn_id(cluster_name: str) -> str:
    return f"kafka_dr_{cluster_name}"


class KafkaClusterHook(BaseHook):
    """confluent-kafka settings for `cluster_name`: bootstrap from the topology, security from a connection."""

    conn_name_attr = "kafka_conn_id"
    conn_type = "kafka_dr"
    hook_name = "kafka-dr Kafka cluster"

    def __init__(
        self, cluster_name: str, kafka_conn_id: str | None = None, *, topology: Topology | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.topology = topology if topology is not None else load_topology()
        self.cluster: Cluster = self.topology.cluster(cluster_name)
        self.explicit_conn_id = kafka_conn_id is not None
        self.kafka_conn_id = kafka_conn_id or default_conn_id(cluster_name)
        self._security: dict[str, Any] | None = None

    def security_settings(self) -> dict[str, Any]:
        """librdkafka security settings of the cluster (secret values included: never log them)."""
        if self._security is None:
            variable = clients.config_env_var(self.cluster.name)
            try:
                conn = self.get_connection(self.kafka_conn_id)
            except AirflowNotFoundException:
                if self.explicit_conn_id:
                    raise
                self._security = clients.extra_settings(self.cluster.name)
                if self._security:
                    self.log.info(
                        "cluster %s: no connection %s; security settings from $%s: %s",
                        self.cluster.name,
                        self.kafka_conn_id,
                        variable,
                        clients.redact(self._security),
                    )
                else:
                    self.log.info(
                        "cluster %s: no connection %s nor $%s: plaintext, no security settings",
                        self.cluster.name,
                        self.kafka_conn_id,
                        variable,
                    )
            else:
                self._security = self._from_connection(conn.extra_dejson, conn.login, conn.password)
                self.log.info(
                    "cluster %s: security settings from connection %s: %s",
                    self.cluster.name,
                    self.kafka_conn_id,
                    clients.redact(self._security),
                )
        return self._security

    def client_config(self, **overrides: Any) -> dict[str, Any]:
        """Settings for a confluent-kafka client; overrides as in kafka_dr.clients.client_config."""
        return clients.client_config(self.cluster, self.env_for_subprocess(), **overrides)

    def env_for_subprocess(self) -> dict[str, str]:
        """Environment variables that give a child process (spark-submit) this cluster's security settings."""
        settings = self.security_settings()
        return {clients.config_env_var(self.cluster.name): json.dumps(settings)} if settings else {}

    def check_reachable(self, timeout: float = 10.0, quiet: bool = False) -> str:
        """Metadata round trip; returns the cluster id or raises ClusterUnreachable with one line. A refused login
        or TLS handshake ends the wait at once and is the reason given: librdkafka retries it until the request
        times out and reports only the time-out, its cause going to the error callback. `quiet`: librdkafka does
        not log each refused connection (a probe repeated for as long as a cluster is down)."""
        refused: list[KafkaError] = []
        admin = AdminClient(
            {
                **self.client_config(),
                **({"log_level": 2} if quiet else {}),  # syslog levels: critical and worse only
                "error_cb": lambda e: refused.append(e) if e.code() in LOGIN_ERRORS else None,
            }
        )
        future = admin.describe_cluster(request_timeout=timeout)
        while not future.done() and not refused:
            admin.poll(0.1)  # serves the error callback
        if refused:
            reason = refused[0].str()
        else:
            try:
                return future.result().cluster_id
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                reason = error.str() if isinstance(error, KafkaError) else str(exc)
        where = f"cluster {self.cluster.name} ({self.cluster.bootstrap_servers})"
        raise ClusterUnreachable(f"{where} is not reachable: {' '.join(reason.split())}")

    def _from_connection(self, extra: dict[str, Any], login: str | None, password: str | None) -> dict[str, Any]:
        settings = dict(extra)
        for key, value in settings.items():
            if not isinstance(value, str | int | float | bool):
                raise clients.ClientConfigError(
                    f"connection {self.kafka_conn_id}: extra {key!r} must be a scalar librdkafka value"
                )
        if login:
            settings["sasl.username"] = login
        if password:
            settings["sasl.password"] = password
        return settings


def clusters_env(
    topology: Topology, clusters: Iterable[str], conn_ids: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The clusters' client settings as a child process's environment (never its command line); `conn_ids`
    names a cluster's connection when it is not `kafka_dr_<cluster>`."""
    env: dict[str, str] = {}
    for cluster in clusters:
        env.update(KafkaClusterHook(cluster, (conn_ids or {}).get(cluster), topology=topology).env_for_subprocess())
    return env


def flows_environ(topology: Topology, flows: Iterable[str]) -> dict[str, str]:
    """This process's environment plus the settings of the flows' clusters from their connections: what the core's
    measurements (flow_lag, check_flow, heal) read a secured cluster's credentials from."""
    clusters = {cluster for name in flows for cluster in (topology.flow(name).source, topology.flow(name).target)}
    return {**os.environ, **clusters_env(topology, sorted(clusters))}
