"""Basic-auth credentials of a cluster's schema registry from an Airflow connection, as the Kafka ones come from
`kafka_dr_<cluster>` (hooks/kafka_cluster.py).

The connection `kafka_dr_<cluster>_registry` (any type, e.g. HTTP) holds them in its login and password. A task
loads them into its own process's environment as $KDR_REGISTRY_<NAME>_USER_INFO, where kafka_dr.schema_registry
reads them (and a registry restart command started by the task inherits them); without that connection the
variable as the deployment set it applies. Each task runs in a process of its own, so they go no further; nothing
is logged.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from ...schema_registry import user_info, user_info_env_var


def registry_conn_id(cluster_name: str) -> str:
    return f"kafka_dr_{cluster_name}_registry"


def registry_user(cluster: str) -> str | None:
    """`user:password` of the cluster's registry: its connection's login, else $KDR_REGISTRY_<NAME>_USER_INFO."""
    try:
        conn = BaseHook.get_connection(registry_conn_id(cluster))
    except AirflowNotFoundException:
        return user_info(cluster)
    return f"{conn.login}:{conn.password or ''}" if conn.login else user_info(cluster)


def registry_env(clusters: Iterable[str]) -> dict[str, str]:
    """$KDR_REGISTRY_<NAME>_USER_INFO of each cluster whose connection has a login."""
    env = {}
    for cluster in clusters:
        try:
            conn = BaseHook.get_connection(registry_conn_id(cluster))
        except AirflowNotFoundException:
            continue
        if conn.login:
            env[user_info_env_var(cluster)] = f"{conn.login}:{conn.password or ''}"
    return env


def load_registry_credentials(clusters: Iterable[str]) -> None:
    """Each cluster's registry credentials from its connection into this process's environment."""
    os.environ.update(registry_env(clusters))
