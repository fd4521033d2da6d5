"""Tasks of the dr_schema_redirect DAG: point a datacenter's schema registry at a cluster's `_schemas` store,
set whether it may lead, restart it and verify it. dr_failover redirects with its own task; this DAG runs the
redirect alone, e.g. the reverse on failback. The redirect itself is kafka_dr.schema_redirect (no Airflow there).
Validation runs first and changes nothing.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from airflow.sdk import task
from airflow.sdk.exceptions import AirflowFailException

from ..runbooks import see_runbook
from ..schema_redirect import steps
from ..schema_redirect.plan import RedirectPlan
from ..schema_redirect.steps import Redirected
from ..schema_registry import RegistryError
from ..topology import TopologyError, load_topology
from . import topology_path
from .common import boolean_param, typed
from .hooks.kafka_cluster import cluster_access

BAD_PARAMS = see_runbook("dr_schema_redirect", "a-param-or-the-topology-is-wrong")  # validation failure's end

# The runbook section of a redirect's RegistryError (kafka_dr.schema_registry), by a phrase of its one line: the first
# entry whose phrase the line holds wins, so a wrapped reason ("... after its restart: <reason>") is told by the reason.
REGISTRY_SECTIONS = (
    ("replicate `_schemas`", see_runbook("dr_schema_redirect", "the-store-lacks-schema-ids")),
    ("one registry leader not shown", see_runbook("dr_failover", "two-registry-leaders-or-none-shown")),
    ("schema_registry.restart_command", see_runbook("dr_schema_redirect", "no-restart-command")),
    ("restart of the", see_runbook("dr_schema_redirect", "the-restart-command-failed")),
    ("store cluster does not answer", see_runbook("dr_schema_redirect", "the-store-cluster-does-not-answer")),
    ("refused the request", see_runbook("dr_schema_redirect", "the-registry-refused-the-credentials")),
    ("must be user:password", see_runbook("dr_schema_redirect", "the-registry-refused-the-credentials")),
    ("not above the ids it knew", see_runbook("dr_schema_redirect", "the-new-id-is-not-above-the-old-ones")),
    ("after its restart", see_runbook("dr_schema_redirect", "the-registry-did-not-come-back-in-time")),
)
REGISTRY_FAILED = see_runbook("dr_schema_redirect", "failure-messages")  # a line none of the phrases names


def registry_failed(exc: RegistryError) -> AirflowFailException:
    """A registry redirect's failure as the task's one line, ending with the runbook section that says what to do
    (dr_schema_redirect's failure messages, whichever DAG redirected)."""
    message = str(exc)
    see = next((see for phrase, see in REGISTRY_SECTIONS if phrase in message), REGISTRY_FAILED)
    return AirflowFailException(f"{message}; {see}")


@task
@typed
def validate_redirect(params: dict[str, Any] | None = None) -> RedirectPlan:
    """dr_schema_redirect: check the params before anything changes; returns the run's plan."""
    params = params or {}
    try:
        path = topology_path(params.get("topology"))
        return RedirectPlan.build(
            load_topology(path),
            str(path),
            params.get("registry_cluster"),
            params.get("store_cluster"),
            boolean_param(params, "leader_eligible"),
        )
    except (TopologyError, ValueError) as exc:
        raise AirflowFailException(f"{exc}; {BAD_PARAMS}") from None


@task
@typed
def redirect_registry(redirect: RedirectPlan) -> Redirected:
    """Redirect, restart and verify the registry; the result says what was applied, the probe registration's id
    (None when not leader-eligible) and the task's own duration, most of it the restart."""
    started = time.monotonic()
    try:
        topo = load_topology(redirect.topology)
        result = steps.redirect_registry(redirect, cluster_access(topo))
    except RegistryError as exc:
        raise registry_failed(exc) from None
    return Redirected(**asdict(result), task_seconds=round(time.monotonic() - started, 3))
