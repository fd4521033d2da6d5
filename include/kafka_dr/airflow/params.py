"""Params shared by the DAGs' trigger forms."""

from __future__ import annotations

import os

from airflow.sdk import Param

from ..topology import TopologyError, load_topology


def topology_param() -> Param:
    return Param(os.environ.get("KDR_TOPOLOGY") or "include/topology.yaml", type="string", title="Topology file",
                 description="A relative path is taken from the project root.")


def form_clusters() -> list[str]:
    """The clusters a trigger form offers: those of the topology the DAG file sees ($KDR_TOPOLOGY)."""
    try:
        return list(load_topology().clusters)
    except TopologyError:
        return ["dc1", "dc2"]
