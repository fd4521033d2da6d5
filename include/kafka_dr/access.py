"""How this process reaches the topology's clusters: one `ClusterAccess`, resolved once where the process begins.

A cluster's address is the topology's; how to log in to it (librdkafka security settings: SASL/SSL, any librdkafka key)
comes from outside the YAML, and is read at the process boundary only: an Airflow task reads its connections
(kafka_dr.airflow.hooks.kafka_cluster.cluster_access); the CLI, a Spark job (spark.job.job_main, whose driver hands
its executors the settings it built) and an application their environment (`from_environ`: KDR_CLUSTER_<NAME>_CONFIG,
what `child_environ` hands a child process).
A schema registry's basic-auth user comes the same way (KDR_REGISTRY_<NAME>_USER_INFO). Core functions take the
object, never an environment or a settings callable; clients.redact keeps secrets out of logs.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from confluent_kafka.admin import AdminClient

from .clients import LIBRDKAFKA_LOG, ClientConfigError
from .topology import Topology


@dataclass(frozen=True)
class ClusterAccess:
    """librdkafka settings for each cluster of `topology`. `security`: cluster name -> its security settings (secret
    values: kept out of the repr; a cluster without an entry is plaintext)."""

    topology: Topology
    security: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, repr=False)
    registry_users: Mapping[str, str] = field(default_factory=dict, repr=False)
    """cluster name -> `user:password` of its schema registry (Confluent's basic.auth.user.info)."""

    @classmethod
    def from_environ(cls, topology: Topology, environ: Mapping[str, str] | None = None) -> ClusterAccess:
        """Each cluster's settings from KDR_CLUSTER_<NAME>_CONFIG (a JSON object) and its registry's user from
        KDR_REGISTRY_<NAME>_USER_INFO of `environ`, default this process's environment; a malformed one is a one-line
        ClientConfigError naming the variable, never its value."""
        environ = os.environ if environ is None else environ
        settings = {name: extra_settings(name, environ) for name in topology.clusters}
        users = {name: user_info(name, environ) for name in topology.clusters}
        return cls(
            topology,
            MappingProxyType({name: s for name, s in settings.items() if s}),
            MappingProxyType({name: u for name, u in users.items() if u}),
        )

    def config(self, cluster: str, **overrides: Any) -> dict[str, Any]:
        """Settings for a confluent-kafka client of kafka-dr's own on `cluster`, its librdkafka log lines going to
        LIBRDKAFKA_LOG; keyword overrides use librdkafka names with dots written as underscores
        (enable_idempotence=True)."""
        return {
            "bootstrap.servers": self.topology.cluster(cluster).bootstrap_servers,
            "logger": LIBRDKAFKA_LOG,
            **self.security.get(cluster, {}),
            **{k.replace("_", "."): v for k, v in overrides.items()},
        }

    def admin(self, cluster: str) -> AdminClient:
        """An admin client on `cluster` (hold it until its futures are done: a collected client cancels them)."""
        return AdminClient(self.config(cluster))

    def registry_headers(self, cluster: str) -> dict[str, str]:
        """The Authorization header for `cluster`'s schema registry, or none."""
        return basic_auth(self.registry_users.get(cluster))

    def child_environ(self, clusters: Iterable[str] | None = None) -> dict[str, str]:
        """The clusters' (default: all) security settings and registry users as a child process's environment
        variables, never its command line: how a Spark job, a background replicator, the drill's probe or a registry's
        restart command gets them."""
        names = list(self.topology.clusters if clusters is None else clusters)
        kafka = {config_env_var(n): json.dumps(dict(self.security[n])) for n in names if n in self.security}
        return {**kafka, **{user_info_env_var(n): self.registry_users[n] for n in names if n in self.registry_users}}


def env_name(cluster_name: str) -> str:
    """A cluster's name as environment variable names hold it: DC1 for dc1, US_EAST for us-east."""
    return re.sub(r"[^A-Za-z0-9]", "_", cluster_name).upper()


def config_env_var(cluster_name: str) -> str:
    """Environment variable holding extra librdkafka settings for a cluster, e.g. KDR_CLUSTER_DC1_CONFIG."""
    return f"KDR_CLUSTER_{env_name(cluster_name)}_CONFIG"


def extra_settings(cluster_name: str, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The cluster's librdkafka settings from its KDR_CLUSTER_<NAME>_CONFIG in `environ` (default this process's
    environment); ClientConfigError naming the variable, never its value, when it is not a JSON object of them."""
    name = config_env_var(cluster_name)
    raw = (environ if environ is not None else os.environ).get(name)
    if not raw:
        return {}
    try:
        settings = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ClientConfigError(f"{name}: not a JSON object ({exc.msg} at position {exc.pos})") from None
    if not isinstance(settings, dict) or not all(
        isinstance(k, str) and isinstance(v, str | int | float | bool) for k, v in settings.items()
    ):
        raise ClientConfigError(f"{name}: must be a JSON object of librdkafka settings (string keys, scalar values)")
    return settings


def user_info_env_var(cluster_name: str) -> str:
    """Environment variable holding `user:password` for a cluster's registry, e.g. KDR_REGISTRY_DC1_USER_INFO."""
    return f"KDR_REGISTRY_{env_name(cluster_name)}_USER_INFO"


def user_info(cluster_name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The cluster's registry credentials, `user:password`, from `environ` (default this process's environment), or
    None when it has none; a malformed value is a ClientConfigError naming the variable, never its value."""
    value = (os.environ if environ is None else environ).get(user_info_env_var(cluster_name))
    if not value:
        return None
    if ":" not in value:
        raise ClientConfigError(f"{user_info_env_var(cluster_name)} must be user:password")
    return value


def basic_auth(user: str | None) -> dict[str, str]:
    """The Authorization header for `user:password`, or none."""
    return {"Authorization": f"Basic {base64.b64encode(user.encode()).decode()}"} if user else {}
