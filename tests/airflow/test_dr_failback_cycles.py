"""Planned failover and failback cycles in a row (two) with dag.test() on an embedded stack of their own, the data
carried by the DAGs' own continuous replicators (dr_bringup starts them, dr_failover stops them, dr_failback starts
them again); in a module of their own so that xdist can run it beside the other failback drills (tests/conftest.py
hands out files)."""

from __future__ import annotations

import json

import pytest
from airflow.utils.state import DagRunState
from support.drills import fail_back, high_watermarks, one_leader, send, states_of
from support.kafka import create_topic
from support.retry import eventually
from support.topology import restart_registry_command, write_topology

from kafka_dr import client_switch
from kafka_dr.clients import read_committed
from kafka_dr.replication import replicators
from kafka_dr.replication.provenance import hops
from kafka_dr.topology import load_topology

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.usefixtures("jobs_in_process")]
FLOWS = ("cy-dc1-to-dc2", "cy-dc2-to-dc1")


def contents(bootstrap: str) -> tuple[list[str], int]:
    """The values of topic `cycles` in one cluster, sorted, and the longest provenance chain among them."""
    ends = {("cycles", 0): (0, high_watermarks(bootstrap)[("cycles", 0)])}
    values, longest = [], 0
    for message in read_committed({"bootstrap.servers": bootstrap}, ends, 30):
        values.append(message.value().decode())
        longest = max(longest, len(hops(message.headers())))
    return sorted(values), longest


def test_planned_failover_and_failback_cycles_in_a_row_lose_nothing_and_duplicate_nothing(
    dags, own_stack, state, tmp_path
):
    """Active-active: twice in a row (the second cycle starts from what a whole cycle leaves: replicators restarted by
    the failback, registries and aliases home; a third cycle proved the same again) a planned failover dc1 -> dc2
    right after records were produced in dc1 (its lag gate waits for the running replicator to copy them), records
    produced in dc2, and a failback: RPO 0 each
    time (failover and failback agree), every record once in each cluster, and no provenance chain longer than the one
    hop each record actually took. No test code copies a record. The schema registries change roles with the data
    (`_schemas` flows both ways): after each failover dc2's registry is the one leader, dc1's follows it; after each
    failback the reverse, each shown by a registration through the follower that the leader serves under a new id."""
    dc1, dc2 = own_stack.config.dc("dc1"), own_stack.config.dc("dc2")
    restart = json.dumps(restart_registry_command(own_stack.data_dir))
    path = write_topology(
        tmp_path / "cycles.yaml",
        {"dc1": dc1.broker_address, "dc2": dc2.broker_address},
        """\
  - {name: cy-dc1-to-dc2, source: dc1, target: dc2, topics: {include: ["cycles", "_schemas"]}}
  - {name: cy-dc2-to-dc1, source: dc2, target: dc1, topics: {include: ["cycles", "_schemas"]}}
""",
        {"dc1": dc1.registry_url, "dc2": dc2.registry_url},
        "clients:\n  cy-producer: {cluster: dc1, role: producer}\n  cy-consumer: {cluster: dc1, role: consumer}\n"
        f"schema_registry: {{primary: dc1, restart_command: {restart}}}\n",
    )
    topology = load_topology(path)
    for broker in (dc1, dc2):
        create_topic({"bootstrap.servers": broker.broker_address}, "cycles")
    expected: list[str] = []
    try:
        bringup = dags["dr_bringup"].test(
            run_conf={"topology": str(path), "flows": list(FLOWS), "max_lag_records": 0, "max_lag_seconds": None}
        )
        assert bringup.state == DagRunState.SUCCESS, states_of(bringup)
        for cycle in range(2):
            batch = [f"c{cycle}-dc1-{i}" for i in range(50)]
            send(dc1.broker_address, "cycles", batch)
            expected += batch
            assert replicators.is_running("cy-dc1-to-dc2"), cycle  # what carries the batch to dc2
            failover = dags["dr_failover"].test(
                run_conf={
                    "topology": str(path),
                    "failed_cluster": "dc1",
                    "target_cluster": "dc2",
                    "mode": "planned",
                    "groups": ".*",
                    "reset_to_datetime": None,
                }
            )
            assert failover.state == DagRunState.SUCCESS, (cycle, states_of(failover))
            assert not replicators.is_running("cy-dc1-to-dc2"), cycle
            # One leader, dc2's: what a client still on dc1's registry registers lands in dc2's store, new id.
            assert one_leader(dc1.registry_url, dc2.registry_url, f"cy-after-failover-{cycle}"), cycle
            batch = [f"c{cycle}-dc2-{i}" for i in range(50)]
            send(dc2.broker_address, "cycles", batch)
            expected += batch
            run = fail_back(dags, path)
            assert run.state == DagRunState.SUCCESS, (cycle, states_of(run))
            assert all(replicators.is_running(flow) for flow in FLOWS), cycle
            reports_dir = state / "reports"
            failover_report = json.loads(sorted(reports_dir.glob("dr_failover-*.json"))[-1].read_text())
            failback_report = json.loads(sorted(reports_dir.glob("dr_failback-*.json"))[-1].read_text())
            assert (failover_report["rpo"]["records"], failover_report["rpo"]["exact"]) == (0, True), cycle
            assert failback_report["unreplicated"]["records"] == 0, cycle
            assert failover_report["schema_registry"]["one_leader"]["via"] == "dc1", cycle
            assert failback_report["schema_registry"]["one_leader"]["via"] == "dc2", cycle
            assert one_leader(dc2.registry_url, dc1.registry_url, f"cy-after-failback-{cycle}"), cycle  # dc1's again
            assert {s.alias: s.active for s in client_switch.states(topology)} == {
                "cy-producer": "dc1",
                "cy-consumer": "dc1",
            }
        for broker in (dc1, dc2):  # the running replicators finish what the last cycle wrote
            address = broker.broker_address
            eventually(lambda a=address: contents(a)[0] == sorted(expected), f"every record in {broker.name}", 60)
            # every record once in each cluster, a copy one hop, never come back for a second
            assert contents(address) == (sorted(expected), 1), broker.name
    finally:
        for flow in FLOWS:
            replicators.stop(flow)
