"""Airflow parts of kafka-dr in the provider layout (hooks, operators, sensors, triggers) plus the plain
tasks the DAGs wire together. Kafka logic stays in the core (kafka_dr.replication and a package per DR phase:
bringup, health, failover, schema_redirect, failback, backfill); these only adapt it to Airflow."""

from __future__ import annotations

import os
from pathlib import Path

from ..paths import DEFAULT_TOPOLOGY, PROJECT_ROOT


def topology_path(path: str | os.PathLike[str] | None = None) -> Path:
    """Absolute topology file: `path`, else $KDR_TOPOLOGY, else include/topology.yaml. A relative path is
    taken from the project root, because an Airflow worker's working directory is arbitrary."""
    chosen = Path(path or os.environ.get("KDR_TOPOLOGY") or DEFAULT_TOPOLOGY).expanduser()
    return chosen if chosen.is_absolute() else PROJECT_ROOT / chosen
