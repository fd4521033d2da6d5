"""One drill at a time, and none after a drill that left production changed until that is put right.

A drill records, before it changes anything, what it will change and must put back (`snapshot`): where each client
alias points, which flows' replicators run, which schema registry leads. The record (STATE_DIR/drill-ledger/open.json)
stays until the drill's last task finds everything as it was and removes it. A drill that failed half-way, or whose
run was stopped, leaves it: the next drill compares the record with the state now and refuses, naming each alias,
flow and registry still not as found (`left`); once an operator has put them back (a failback, a dr_bringup run
that starts the replicators), the next drill finds nothing left and goes on. `kafka-dr drill resolve --accept`
closes the record when the state now is the one wanted, and with it the failover the drill left recorded
(kafka_dr.roles): no failback is pending for a state accepted as it is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException

from .. import client_switch, roles
from ..access import ClusterAccess
from ..replication.liveness import liveness
from ..runbooks import see_runbook
from ..schema_registry import registry_role
from ..state import locked, now_iso, subdir, write_json
from .plan import inner_run_id

LIVENESS_WINDOW_S = 2.0  # a replicator elsewhere renews its claim every second


class DrillRefused(RuntimeError):
    """Another drill runs, or an earlier one left production changed; one line saying which and what."""


def snapshot(access: ClusterAccess) -> dict[str, dict[str, Any]]:
    """What a drill changes and must put back, as it is now."""
    topology = access.topology
    replicators = {}
    for flow in topology.flows:
        try:
            replicators[flow.name] = liveness(flow.name, access.config(flow.target), LIVENESS_WINDOW_S)
        except KafkaException:
            replicators[flow.name] = None  # its target does not answer: unknown
    return {
        "aliases": {state.alias: state.active for state in client_switch.states(topology)},
        "replicators": {name: None if live is None else live.running for name, live in replicators.items()},
        "registries": {
            name: registry_role(cluster.schema_registry, headers=access.registry_headers(name))["role"]
            for name, cluster in topology.clusters.items()
            if cluster.schema_registry
        },
    }


def left(before: dict[str, dict[str, Any]], now: dict[str, dict[str, Any]]) -> list[str]:
    """One line per thing not as it was `before`."""
    lines = []
    for alias, cluster in before.get("aliases", {}).items():
        if now.get("aliases", {}).get(alias) != cluster:
            lines.append(f"client alias {alias} on {now.get('aliases', {}).get(alias)} (was {cluster})")
    for flow, running in before.get("replicators", {}).items():
        if running and not now.get("replicators", {}).get(flow):
            lines.append(f"flow {flow}: its replicator is not running (it was)")
    for cluster, role in before.get("registries", {}).items():
        if now.get("registries", {}).get(cluster) != role:
            lines.append(f"schema registry of {cluster}: {now.get('registries', {}).get(cluster)} (was {role})")
    return lines


def _path() -> Path:
    return subdir("drill-ledger") / "open.json"


def open_record() -> dict[str, Any] | None:
    path = _path()
    return json.loads(path.read_text()) if path.exists() else None


def begin(
    run_id: str,
    access: ClusterAccess,
    scenario: str,
    running: Callable[[str], bool],
) -> tuple[dict[str, dict[str, Any]], str | None]:
    """Open the ledger for drill `run_id` and return the state it must put back, with a line about an earlier drill
    that ended without closing it but left nothing changed (None otherwise). DrillRefused, changing nothing, when
    another drill is open and `running(its run id)`, or left something changed."""
    with locked(_path()):
        earlier = open_record()
        if earlier is not None and earlier["run_id"] == run_id:
            return earlier["before"], None  # this drill's own record: a task retried
        if earlier is not None and running(earlier["run_id"]):
            raise DrillRefused(f"drill {earlier['run_id']} is running: one drill at a time")
        now = snapshot(access)
        note = None
        if earlier is not None:
            changed = left(earlier["before"], now)
            if changed:
                raise DrillRefused(
                    f"drill {earlier['run_id']} (started {earlier['started']}) left production changed: "
                    f"{'; '.join(changed)}. Put them back, or accept the state now with `kafka-dr drill resolve "
                    "--accept`, then start the drill again; "
                    + see_runbook("dr_drill", "a-drill-left-production-changed")
                )
            note = f"drill {earlier['run_id']} ended without closing; it left nothing changed"
        record = {"run_id": run_id, "scenario": scenario, "started": now_iso(), "before": now, "left": []}
        write_json(_path(), record)
        return now, note


def end(run_id: str, access: ClusterAccess) -> list[str]:
    """Close drill `run_id`'s record when it left nothing changed; else keep it, naming what it left (returned)."""
    with locked(_path()):
        record = open_record()
        if record is None or record["run_id"] != run_id:
            return []
        changed = left(record["before"], snapshot(access))
        if changed:
            write_json(_path(), {**record, "left": changed, "ended": now_iso()})
        else:
            _path().unlink()
        return changed


def resolve(access: ClusterAccess, accept: bool) -> tuple[dict[str, Any] | None, list[str]]:
    """`kafka-dr drill resolve`: the open record and what it left; closed when nothing is left, or with `accept`."""
    with locked(_path()):
        record = open_record()
        if record is None:
            return None, []
        changed = left(record["before"], snapshot(access))
        if accept or not changed:
            _path().unlink()
        if accept and changed:  # its failover's clients stay where they are: no failback is pending any more
            roles.accepted(inner_run_id(record["run_id"], "failover"))
        return record, changed
