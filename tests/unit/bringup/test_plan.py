"""dr_bringup's plan and checks that need no cluster (kafka_dr.bringup): the plan's round trip through the mapped
operators' kwargs it travels as, and two topology entries that are one Kafka cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_dr.bringup.checks import same_clusters
from kafka_dr.bringup.plan import BringupPlan

CLUSTERS = 'clusters:\n  dc1: {bootstrap_servers: "127.0.0.1:1"}\n  dc2: {bootstrap_servers: "127.0.0.1:2"}\n'


def test_the_plan_is_the_mapped_operators_kwargs_and_comes_back_from_them(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(CLUSTERS + "flows:\n  - {name: a, source: dc1, target: dc2, topics: {include: ['x']}}\n")
    plan = BringupPlan(str(path), ("a",))
    kwargs = plan.to_kwargs()
    assert kwargs == [{"flow": "a", "topology": str(path)}]
    assert BringupPlan.from_kwargs(json.loads(json.dumps(kwargs))) == plan
    topo, flows = plan.load()
    assert [f.name for f in flows] == ["a"] and list(topo.clusters) == ["dc1", "dc2"]


def test_a_plan_of_nothing_or_of_two_topologies_is_refused() -> None:
    with pytest.raises(ValueError, match="bring-up plan: no flow"):
        BringupPlan.from_kwargs([])
    with pytest.raises(ValueError, match="bring-up plan: flows of several topologies: a.yaml, b.yaml"):
        BringupPlan.from_kwargs([{"flow": "a", "topology": "a.yaml"}, {"flow": "b", "topology": "b.yaml"}])
    with pytest.raises(ValueError, match="bring-up plan entry: missing topology"):
        BringupPlan.from_kwargs([{"flow": "a"}])


def test_two_entries_of_one_kafka_cluster_are_a_copy_onto_itself() -> None:
    assert same_clusters({"dc1": "id-1", "dc2": "id-2"}) == []
    assert same_clusters({"dc1": "id-1", "dc2": "id-1", "dc3": "id-1"}) == [
        "clusters dc1 and dc2 are the same Kafka cluster (id id-1)",
        "clusters dc1 and dc3 are the same Kafka cluster (id id-1)",
    ]
