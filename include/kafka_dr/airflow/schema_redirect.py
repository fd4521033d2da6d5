"""Tasks of the dr_schema_redirect DAG: point a datacenter's schema registry at a cluster's `_schemas` store,
set whether it may lead, restart it and verify it. dr_failover redirects with its own task; this DAG runs the
redirect alone, e.g. the reverse on failback. The redirect itself is kafka_dr.schema_redirect (no Airflow there).
Validation runs first and changes nothing.
"""

from __future__ import annotations

import time
from typing import Any

from airflow.sdk import task
from airflow.sdk.exceptions import AirflowFailException

from ..schema_redirect import steps
from ..schema_redirect.plan import RedirectPlan
from ..schema_registry import RegistryError
from ..topology import TopologyError, load_topology
from . import topology_path
from .common import boolean_param
from .hooks.kafka_cluster import KafkaClusterHook
from .hooks.schema_registry import load_registry_credentials


@task
def validate_redirect(params: dict[str, Any] | None = None) -> dict[str, Any]:
    """dr_schema_redirect: check the params before anything changes; returns the run's plan (RedirectPlan)."""
    params = params or {}
    try:
        path = topology_path(params.get("topology"))
        plan = RedirectPlan.build(
            load_topology(path),
            str(path),
            params.get("registry_cluster"),
            params.get("store_cluster"),
            boolean_param(params, "leader_eligible"),
        )
    except (TopologyError, ValueError) as exc:
        raise AirflowFailException(str(exc)) from None
    return plan.to_dict()


@task
def redirect_registry(plan: dict[str, Any]) -> dict[str, Any]:
    """Redirect, restart and verify the registry; the result says what was applied, the probe registration's id
    (None when not leader-eligible) and the task's own duration, most of it the restart."""
    started = time.monotonic()
    redirect = RedirectPlan.from_dict(plan)
    load_registry_credentials([redirect.registry])
    try:
        topo = load_topology(redirect.topology)
        result = steps.redirect_registry(redirect, KafkaClusterHook(redirect.store, topology=topo).client_config())
    except RegistryError as exc:
        raise AirflowFailException(str(exc)) from None
    return {**result.to_dict(), "task_seconds": round(time.monotonic() - started, 3)}
