"""Topology files for tests: the clusters of the servers a test started, plus the YAML it gives for the rest."""

from __future__ import annotations

import json
import re
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

NO_APPROVAL = "dr: {approval: none}"


def topology_text(
    clusters: Mapping[str, str],
    flows: str = "",
    registries: Mapping[str, str] | None = None,
    extra: str = "",
) -> str:
    """A topology document: `clusters` maps a name to its bootstrap address, `registries` a name to its schema
    registry URL; `flows` is the YAML of the `flows:` list (with or without its key); `extra` any further keys.
    Without a `dr:` key in `extra` the failovers and failbacks it drives need no approval (NO_APPROVAL): the tests
    that show the approval give their own."""
    lines = ["clusters:"]
    for name, bootstrap in clusters.items():
        registry = (registries or {}).get(name)
        lines.append(
            f"  {name}: {{bootstrap_servers: {json.dumps(bootstrap)}"
            + (f", schema_registry: {json.dumps(registry)}" if registry else "")
            + "}"
        )
    flows = flows.strip("\n")
    if flows and not flows.lstrip().startswith("flows:"):
        flows = "flows:\n" + flows
    extra = extra.strip("\n")
    if not re.search(r"^dr:", extra, re.MULTILINE):
        extra = f"{extra}\n{NO_APPROVAL}".strip("\n")
    return "\n".join([*lines, flows, extra]).rstrip("\n") + "\n"


def write_topology(
    path: Path,
    clusters: Mapping[str, str],
    flows: str = "",
    registries: Mapping[str, str] | None = None,
    extra: str = "",
) -> Path:
    path.write_text(topology_text(clusters, flows, registries, extra), encoding="utf-8")
    return path


def write_brokers_topology(path: Path, brokers: Mapping[str, Any], flows: str) -> Path:
    """write_topology over embedded brokers: `brokers` maps a cluster name to its BrokerProcess."""
    return write_topology(path, {name: broker.bootstrap for name, broker in brokers.items()}, flows)


def restart_registry_command(data_dir: Path) -> str:
    """The `schema_registry.restart_command` that restarts a registry of the local stack kept in `data_dir`."""
    return (
        f"{shlex.quote(sys.executable)} -m kafka_dr_dev.cli local restart-registry {{cluster}} --data-dir "
        f"{shlex.quote(str(data_dir))} --kafkastore {{kafkastore}} --leader-eligible {{leader_eligible}}"
    )


def cut_off_commands(data_dir: Path) -> str:
    """The topology's `dr:` keys with which a disaster drill stops a DC of the local stack in `data_dir` and starts it
    again (include/topology.yaml has the same for the default stack)."""
    where = f"{{cluster}} --data-dir {shlex.quote(str(data_dir))}"
    cut, back = (
        f"{shlex.quote(sys.executable)} -m kafka_dr_dev.cli local {verb} {where}" for verb in ("stop", "start")
    )
    return f"cut_off_command: {json.dumps(cut)}, bring_back_command: {json.dumps(back)}"
