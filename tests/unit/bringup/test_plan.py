"""dr_bringup's plan and checks that need no cluster (kafka_dr.bringup): the plan's flows in its topology, and two
topology entries that are one Kafka cluster. The kwargs it travels as are the Airflow side's
(tests/airflow/test_step_contracts.py)."""

from __future__ import annotations

from pathlib import Path

from kafka_dr.bringup.checks import same_clusters
from kafka_dr.bringup.plan import BringupPlan

CLUSTERS = 'clusters:\n  dc1: {bootstrap_servers: "127.0.0.1:1"}\n  dc2: {bootstrap_servers: "127.0.0.1:2"}\n'


def test_the_plan_loads_its_flows_from_its_topology(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(CLUSTERS + "flows:\n  - {name: a, source: dc1, target: dc2, topics: {include: ['x']}}\n")
    topo, flows = BringupPlan(str(path), ("a",)).load()
    assert [f.name for f in flows] == ["a"] and list(topo.clusters) == ["dc1", "dc2"]


def test_two_entries_of_one_kafka_cluster_are_a_copy_onto_itself() -> None:
    assert same_clusters({"dc1": "id-1", "dc2": "id-2"}) == []
    assert same_clusters({"dc1": "id-1", "dc2": "id-1", "dc3": "id-1"}) == [
        "clusters dc1 and dc2 are the same Kafka cluster (id id-1)",
        "clusters dc1 and dc3 are the same Kafka cluster (id id-1)",
    ]
