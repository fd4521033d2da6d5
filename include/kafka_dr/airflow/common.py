"""What the DR DAGs share: the trigger forms' topology and flows params and cluster choices, checks of the
params every run validates first, the flows a run acts on, how a task times its step, and how a report is
written."""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, ParamSpec

from airflow.sdk import Param

from ..state import now_iso, report_path
from ..topology import Flow, Topology, TopologyError, load_topology
from . import topology_path
from .hooks.kafka_cluster import KafkaClusterHook

P = ParamSpec("P")


def topology_param() -> Param:
    """The topology file, first param of every DR form; $KDR_TOPOLOGY preselects a deployment's own file."""
    return Param(
        os.environ.get("KDR_TOPOLOGY") or "include/topology.yaml",
        type="string",
        title="Topology file",
        description="A relative path is taken from the project root.",
    )


def flows_param(what: str) -> Param:
    """The flows a run acts on: a list of flow names, empty for every flow of the topology."""
    return Param([], type="array", items={"type": "string"}, title="Flows", description=f"{what}; empty: every flow.")


def cluster_param(clusters: list[str], title: str, description: str, default: str | None = None) -> Param:
    """One of the topology's clusters (`form_clusters`), chosen from a list in the trigger form. Without `default`
    the form requires a choice and Airflow refuses a trigger that leaves it out (a DR switch has no defaults)."""
    if default is None:
        return Param(type="string", enum=clusters, title=title, description=description)
    return Param(default, type="string", enum=clusters, title=title, description=description)


def form_clusters() -> list[str]:
    """The clusters a trigger form offers: those of the topology the DAG file sees ($KDR_TOPOLOGY)."""
    try:
        return list(load_topology().clusters)
    except TopologyError:
        return ["dc1", "dc2"]


def selected_flows(params: Mapping[str, Any], purpose: str | None = None) -> tuple[Path, Topology, list[Flow]]:
    """The run's topology file, topology and flows (param `flows`; empty: all), after checking each of their
    clusters' client settings; with `purpose`, a topology without flows is refused naming it. Raises
    TopologyError, ClientConfigError or ValueError with one line."""
    path = topology_path(params.get("topology"))
    topo = load_topology(path)
    if purpose is not None and not topo.flows:
        raise TopologyError(f"{path}: flows: none defined, {purpose}")
    flows = params.get("flows")
    if isinstance(flows, str) or not isinstance(flows, list | tuple | None):
        raise ValueError(f"param flows: must be a list of flow names, got {flows!r}")
    selected = [topo.flow(name) for name in dict.fromkeys(flows or [f.name for f in topo.flows])]
    for cluster in flow_clusters(selected):
        KafkaClusterHook(cluster, topology=topo).security_settings()
    return path, topo, selected


def boolean_param(params: Mapping[str, Any], name: str, default: bool | None = None) -> bool:
    """Param `name`, true or false (`default` when absent and one is given); else ValueError with one line."""
    value = params.get(name, default)
    if not isinstance(value, bool):
        raise ValueError(f"param {name}: must be true or false, got {value!r}")
    return value


def groups_param(params: Mapping[str, Any]) -> str:
    """Param `groups`: a regex (full match) of consumer groups, every group when empty; else ValueError."""
    groups = params.get("groups") or ".*"
    try:
        re.compile(groups)
    except re.error as exc:
        raise ValueError(f"param groups: bad regex {groups!r}: {exc}") from None
    return groups


def flow_clusters(flows: Iterable[Flow]) -> list[str]:
    """The clusters the flows read from or write to, sorted."""
    return sorted({c for flow in flows for c in (flow.source, flow.target)})


def timed(func: Callable[P, dict[str, Any]]) -> Callable[P, dict[str, Any]]:
    """The task's result plus "step": {"started", "ended"} (UTC, milliseconds), for the report's step table and
    RTO: one way of timing for every step. Goes under @task: the wrapper keeps the function's name (the task id)
    and signature (the params Airflow passes)."""

    @functools.wraps(func)
    def run(*args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        started = now_iso("milliseconds")
        result = func(*args, **kwargs)
        return {**result, "step": {"started": started, "ended": now_iso("milliseconds")}}

    return run


def write_report(dag_id: str, run_id: str, body: dict[str, Any], page: str | None = None) -> dict[str, Any]:
    """Write STATE_DIR/reports/<dag>-<run>.json (and the Markdown `page` beside it); returns the body with the
    file's path, as the report task's result."""
    path = report_path(dag_id, run_id)
    path.write_text(json.dumps(body, indent=2, default=str) + "\n", encoding="utf-8")
    if page is not None:
        report_path(dag_id, run_id, ".md").write_text(page, encoding="utf-8")
    return {**body, "report_file": str(path)}
