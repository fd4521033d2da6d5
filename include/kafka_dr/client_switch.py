"""Which cluster each client alias of the topology connects to now.

An alias starts on its home cluster (topology `clients:`); failover and failback move it, and every
move is recorded. Applications ask `client_config_for(alias)` (or `kafka-dr clients ALIAS`) where to
connect instead of hard-coding bootstrap servers, so a switch reaches them on their next (re)connect.

State: STATE_DIR/clients/active.json ({alias: {cluster, since, reason}}) and, one JSON line per move,
STATE_DIR/clients/history.jsonl. Point $KDR_STATE_DIR at shared storage when applications run on
other hosts than Airflow.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .access import ClusterAccess
from .state import locked, now_iso, subdir, write_json
from .topology import Topology, TopologyError, load_topology

SWITCH_CHECK_S = 1.0  # how often a following client (kafka_dr.follower) reads its alias's active cluster while it works


@dataclass(frozen=True)
class AliasState:
    alias: str
    role: str
    home: str
    active: str
    since: str | None  # None: never moved
    reason: str | None


@dataclass(frozen=True)
class Move:
    alias: str
    from_cluster: str
    to_cluster: str
    at: str
    reason: str


def _active_file() -> Path:
    return subdir("clients") / "active.json"


def _history_file() -> Path:
    return subdir("clients") / "history.jsonl"


def _read_active() -> dict[str, dict[str, Any]]:
    path = _active_file()
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def states(topology: Topology) -> list[AliasState]:
    active = _read_active()
    return [
        AliasState(
            alias.name,
            alias.role,
            alias.cluster,
            active.get(alias.name, {}).get("cluster", alias.cluster),
            active.get(alias.name, {}).get("since"),
            active.get(alias.name, {}).get("reason"),
        )
        for alias in topology.clients.values()
    ]


def active_cluster(topology: Topology, alias: str) -> str:
    """The cluster `alias` should connect to now (its home cluster until moved)."""
    home = topology.client(alias).cluster
    cluster = _read_active().get(alias, {}).get("cluster", home)
    if cluster not in topology.clusters:
        raise TopologyError(
            f"client alias {alias!r} is switched to cluster {cluster!r}, which the topology no "
            f"longer has (known: {', '.join(topology.clusters)})"
        )
    return cluster


def client_config_for(alias: str, topology: Topology | None = None) -> dict[str, Any]:
    """librdkafka settings for `alias`: bootstrap servers of its active cluster plus that cluster's security
    settings from the environment, as plain data: the application's logging is its own. Usage:
    `Producer(client_config_for("orders-service"))`."""
    topology = topology or load_topology()
    config = ClusterAccess.from_environ(topology).config(active_cluster(topology, alias))
    del config["logger"]
    return config


def switch(topology: Topology, aliases: Iterable[str], to_cluster: str, reason: str) -> list[Move]:
    """Move `aliases` to `to_cluster`; aliases already there are not moved. Returns the moves made."""
    topology.cluster(to_cluster)
    names = [topology.client(a).name for a in aliases]
    moves: list[Move] = []
    with locked(_active_file()):
        active = _read_active()
        at = now_iso()
        for name in names:
            current = active.get(name, {}).get("cluster", topology.clients[name].cluster)
            if current == to_cluster:
                continue
            active[name] = {"cluster": to_cluster, "since": at, "reason": reason}
            moves.append(Move(name, current, to_cluster, at, reason))
        if moves:
            write_json(_active_file(), active)
            with open(_history_file(), "a", encoding="utf-8") as history:
                history.writelines(json.dumps(asdict(m)) + "\n" for m in moves)
    return moves


def history() -> list[Move]:
    path = _history_file()
    if not path.exists():
        return []
    return [Move(**json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
