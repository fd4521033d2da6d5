"""Cutting a cluster off for a disaster drill, and bringing it back, with the topology's commands.

`dr.cut_off_command` and `dr.bring_back_command` (placeholders `{cluster}`, `{registry_url}`, `{bootstrap_servers}`)
are the deployment's own: on the embedded stack `kafka-dr-dev local stop {cluster} --registry-url {registry_url}` kills
the DC's broker and registry and `kafka-dr-dev local start ...` starts them again with their data
(include/topology.yaml); a deployment may drop the cluster's traffic at a firewall the drill controls. kafka-dr never
kills a cluster it was not told how to, so a disaster drill on a topology without them is refused at its start.
"""

from __future__ import annotations

import shlex
import subprocess

from ..runbooks import see_runbook
from ..schema_registry import first_url
from ..topology import Topology
from .plan import DrillError

COMMAND_TIMEOUT_S = 180.0


def check_commands(topology: Topology, cluster: str) -> None:
    if topology.dr.cut_off_command is None:
        raise DrillError(
            f"disaster_round_trip cuts {cluster} off, and the topology says not how: set dr.cut_off_command and "
            "dr.bring_back_command, or run planned_round_trip; "
            + see_runbook("dr_drill", "the-topology-cannot-run-this-drill")
        )


def cut_off(topology: Topology, cluster: str) -> str:
    """Run dr.cut_off_command for `cluster`; returns its output's first line. DrillError with one line on failure."""
    check_commands(topology, cluster)
    assert topology.dr.cut_off_command is not None
    return _run(topology, topology.dr.cut_off_command, cluster, "dr.cut_off_command")


def bring_back(topology: Topology, cluster: str) -> str:
    """Run dr.bring_back_command for `cluster` (returns once it has: the command waits for the cluster to serve)."""
    check_commands(topology, cluster)
    assert topology.dr.bring_back_command is not None
    return _run(topology, topology.dr.bring_back_command, cluster, "dr.bring_back_command")


def _run(topology: Topology, template: str, cluster: str, key: str) -> str:
    values = {
        "cluster": cluster,
        "registry_url": first_url(topology.cluster(cluster).schema_registry or ""),
        "bootstrap_servers": topology.cluster(cluster).bootstrap_servers,
    }
    command = [part.format(**values) for part in shlex.split(template)]  # no shell: values cannot inject
    # Either way the DC may be left down: the operator looks, and brings it back by hand.
    see = (
        see_runbook("dr_drill", "the-cluster-was-not-cut-off")
        if key == "dr.cut_off_command"
        else see_runbook("dr_drill", "the-cluster-did-not-come-back")
    )
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DrillError(f"{key} for {cluster} ({shlex.join(command)}): {exc}; {see}") from None
    lines = (done.stdout + done.stderr).strip().splitlines()
    if done.returncode != 0:
        raise DrillError(f"{key} for {cluster} exited {done.returncode}: {lines[-1] if lines else 'no output'}; {see}")
    return lines[0] if lines else "done"  # `kafka-dr-dev local stop|start`: "stopped: dc1 registry, dc1 broker"
