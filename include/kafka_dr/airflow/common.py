"""What the DR DAGs share: the trigger forms' topology and flows params and cluster choices, checks of the
params every run validates first, the flows a run acts on, a task's typed contract (its arguments and result through
kafka_dr.codec, its step timed), the kwargs of per-flow mapped operators, and how a report is written."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import os
import re
import typing
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from airflow.sdk import Param, XComArg
from airflow.sdk.exceptions import AirflowFailException

from ..codec import CodecError, decode, encode
from ..state import now_iso, report_path
from ..topology import Flow, Topology, TopologyError, load_topology
from . import topology_path
from .hooks.kafka_cluster import KafkaClusterHook

P = ParamSpec("P")
R = TypeVar("R")


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
    RTO, for a task whose result is a dict (an operator's job summary); a typed task (`typed`) is timed in its
    result's `step` field. Goes under @task: the wrapper keeps the function's name (the task id) and signature (the
    params Airflow passes)."""

    @functools.wraps(func)
    def run(*args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        started = now_iso("milliseconds")
        result = func(*args, **kwargs)
        return {**result, "step": _step(started)}

    return run


def typed(func: Callable[P, R]) -> Callable[P, Any]:
    """A task's contract in types: each annotated argument is decoded from the JSON Airflow hands it (an upstream
    task's XCom; None from a skipped one) and the result encoded back (kafka_dr.codec); a result with a `step` field
    gets the task's start and end there (UTC, milliseconds), for the report's step table and RTO. An argument that
    does not fit its type fails the task in one line naming the task, the argument and the field. Goes under @task:
    the wrapper keeps the function's name (the task id) and signature (what the DAG passes, checked when it is
    parsed)."""
    signature = inspect.signature(func)

    @functools.wraps(func)
    def run(*args: P.args, **kwargs: P.kwargs) -> Any:
        hints = typing.get_type_hints(func)
        bound = signature.bind(*args, **kwargs)
        try:
            for name, value in bound.arguments.items():
                bound.arguments[name] = decode(hints.get(name, Any), value, f"{func.__name__}({name})")
        except CodecError as exc:
            raise AirflowFailException(str(exc)) from None
        started = now_iso("milliseconds")
        result = func(*bound.args, **bound.kwargs)
        if dataclasses.is_dataclass(result) and any(f.name == "step" for f in dataclasses.fields(result)):
            result = dataclasses.replace(result, step=_step(started))
        return encode(result)

    return run


def _step(started: str) -> dict[str, str]:
    return {"started": started, "ended": now_iso("milliseconds")}


def result_field(result: XComArg, name: str) -> XComArg:
    """The field `name` of a typed task's result, as an XCom of its own (the task pushes each field:
    multiple_outputs=True), for an operator's templated argument; a field its result type lacks fails the DAG's
    parse, not the run."""
    func = result.operator.python_callable
    kind = typing.get_type_hints(func).get("return")
    if not dataclasses.is_dataclass(kind) or name not in {f.name for f in dataclasses.fields(kind)}:
        raise TypeError(f"task {result.operator.task_id} returns {getattr(kind, '__name__', kind)}: no field {name!r}")
    if not result.operator.multiple_outputs:
        raise TypeError(f"task {result.operator.task_id} pushes no XCom per field: give it multiple_outputs=True")
    return result[name]


def flow_kwargs(topology: str, flows: Iterable[str]) -> list[dict[str, str]]:
    """The kwargs of a per-flow mapped operator (replication, lag gate, health check): one {"flow", "topology"} per
    flow."""
    return [{"flow": name, "topology": topology} for name in flows]


def write_report(dag_id: str, run_id: str, body: dict[str, Any], page: str | None = None) -> dict[str, Any]:
    """Write STATE_DIR/reports/<dag>-<run>.json (and the Markdown `page` beside it); returns the body with the
    file's path, as the report task's result."""
    path = report_path(dag_id, run_id)
    path.write_text(json.dumps(body, indent=2, default=str) + "\n", encoding="utf-8")
    if page is not None:
        report_path(dag_id, run_id, ".md").write_text(page, encoding="utf-8")
    return {**body, "report_file": str(path)}
