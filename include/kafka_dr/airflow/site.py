"""Airflow's own facts for readiness (kafka_dr.readiness), read from inside a task: which DR DAGs are paused, and
which user ids the auth manager knows.

The paused flags come through the Task SDK (the execution API's DAG endpoint), so they are read on any executor; the
users only where the auth manager keeps them in Airflow's configuration (SimpleAuthManager). A task cannot read the
FAB auth manager's users from the metadata database, so there the approvers check says it was not checked here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from airflow.configuration import conf
from airflow.sdk.exceptions import AirflowRuntimeError

SIMPLE_AUTH_MANAGER = "SimpleAuthManager"


def paused_dags(ti: Any, dag_ids: Iterable[str]) -> frozenset[str]:
    """The DAGs of `dag_ids` that are paused, or that Airflow does not know (a run of it would never start either)."""
    paused = set()
    for dag_id in dag_ids:
        try:
            if ti.get_dag(dag_id).is_paused:
                paused.add(dag_id)
        except AirflowRuntimeError:  # no such DAG: not deployed, or not parsed yet
            paused.add(dag_id)
    return frozenset(paused)


def known_users() -> frozenset[str] | None:
    """The user ids the auth manager knows, where a task can read them (SimpleAuthManager's users, from the
    configuration); None for any other auth manager."""
    if not conf.get("core", "auth_manager", fallback="").endswith(SIMPLE_AUTH_MANAGER):
        return None
    from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

    return frozenset(user.get_id() for user in SimpleAuthManager.get_users())
