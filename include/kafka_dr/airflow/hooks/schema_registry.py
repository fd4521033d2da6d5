"""Basic-auth credentials of a cluster's schema registry from an Airflow connection, as the Kafka ones come from
`kafka_dr_<cluster>` (hooks/kafka_cluster.py).

The connection `kafka_dr_<cluster>_registry` (any type, e.g. HTTP) holds them in its login and password; without it
the variable $KDR_REGISTRY_<NAME>_USER_INFO as the deployment set it applies. `registry_user` is what the task's
ClusterAccess holds (hooks/kafka_cluster.cluster_access); a child process the task starts (a registry's restart
command, the drill's probe) gets them in its environment, never on its command line. Nothing is logged.
"""

from __future__ import annotations

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from ...access import user_info


def registry_conn_id(cluster_name: str) -> str:
    return f"kafka_dr_{cluster_name}_registry"


def registry_user(cluster: str) -> str | None:
    """`user:password` of the cluster's registry: its connection's login, else $KDR_REGISTRY_<NAME>_USER_INFO."""
    try:
        conn = BaseHook.get_connection(registry_conn_id(cluster))
    except AirflowNotFoundException:
        return user_info(cluster)
    return f"{conn.login}:{conn.password or ''}" if conn.login else user_info(cluster)
