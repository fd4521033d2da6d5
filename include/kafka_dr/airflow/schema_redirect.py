"""Tasks of the dr_schema_redirect DAG: point a datacenter's schema registry at a cluster's `_schemas` store,
set whether it may lead, restart it and verify it. dr_failover redirects with its own task; this DAG runs the
redirect alone, e.g. the reverse on failback. Validation runs first and changes nothing.
"""

from __future__ import annotations

import time
from typing import Any

from airflow.sdk import task
from airflow.sdk.exceptions import AirflowFailException

from ..schema_registry import RegistryError, redirect
from ..topology import TopologyError, load_topology
from . import topology_path
from .common import boolean_param
from .hooks.schema_registry import load_registry_credentials


@task
def validate_redirect(params: dict[str, Any] | None = None) -> dict[str, Any]:
    """dr_schema_redirect: check the params before anything changes."""
    params = params or {}
    try:
        path = topology_path(params.get("topology"))
        topo = load_topology(path)
        registry, store = params.get("registry_cluster"), params.get("store_cluster")
        if topo.cluster(str(registry)).schema_registry is None:
            raise ValueError(f"param registry_cluster: cluster {registry} has no schema_registry URL")
        topo.cluster(str(store))
        eligible = boolean_param(params, "leader_eligible")
    except (TopologyError, ValueError) as exc:
        raise AirflowFailException(str(exc)) from None
    return {"topology": str(path), "registry": registry, "store": store, "leader_eligible": eligible}


@task
def redirect_registry(plan: dict[str, Any]) -> dict[str, Any]:
    """Redirect, restart and verify the registry; the result says what was applied, the probe registration's id
    (None when not leader-eligible) and the task's own duration, most of it the restart."""
    started = time.monotonic()
    load_registry_credentials([plan["registry"]])
    try:
        result = redirect(load_topology(plan["topology"]), plan["registry"], plan["store"], plan["leader_eligible"])
    except RegistryError as exc:
        raise AirflowFailException(str(exc)) from None
    return {**result.to_dict(), "task_seconds": round(time.monotonic() - started, 3)}
