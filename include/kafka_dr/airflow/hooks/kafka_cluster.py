"""Kafka client settings for one cluster of the topology, with security taken from an Airflow connection.

The topology file says where a cluster is; the connection `kafka_dr_<cluster>` says how to log in:
its extras are librdkafka settings ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", ...}),
its login/password become sasl.username/sasl.password (any connection type will do, e.g. Generic).
Without that connection the cluster's KDR_CLUSTER_<NAME>_CONFIG variable applies (none on the local
stack). `cluster_access` reads them for every cluster once, into the task's ClusterAccess (kafka_dr.access), which
core functions take; a Spark job gets them through its environment (ClusterAccess.child_environ), never on a command
line, and nothing secret is logged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from ... import access, clients
from ...access import ClusterAccess
from ...topology import Cluster, Topology, load_topology
from .schema_registry import registry_user

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
            variable = access.config_env_var(self.cluster.name)
            try:
                conn = self.get_connection(self.kafka_conn_id)
            except AirflowNotFoundException:
                if self.explicit_conn_id:
                    raise
                self._security = access.extra_settings(self.cluster.name)
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
        """Settings for a confluent-kafka client; overrides as in ClusterAccess.config."""
        return ClusterAccess(self.topology, {self.cluster.name: self.security_settings()}).config(
            self.cluster.name, **overrides
        )

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


def cluster_access(topology: Topology, conn_ids: Mapping[str, str] | None = None) -> ClusterAccess:
    """How this task reaches every cluster of `topology`, resolved once: each one's Kafka settings from its
    connection (`conn_ids` names it when it is not `kafka_dr_<cluster>`), its registry's user from
    `kafka_dr_<cluster>_registry`, else the environment's variables. Core functions take the result."""
    security = {
        name: KafkaClusterHook(name, (conn_ids or {}).get(name), topology=topology).security_settings()
        for name in topology.clusters
    }
    users = {name: registry_user(name) for name in topology.clusters}
    return ClusterAccess(
        topology, {n: s for n, s in security.items() if s}, {n: u for n, u in users.items() if u is not None}
    )
