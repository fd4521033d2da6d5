"""The registry redirects of the DR runs (kafka_dr.schema_redirect): the plan dr_schema_redirect checks and its XCom
round trip, and when a failover or failback leaves the registries alone, saying why. No registry is called."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_dr.access import ClusterAccess
from kafka_dr.codec import CodecError, decode, encode
from kafka_dr.schema_redirect.plan import RedirectPlan
from kafka_dr.schema_redirect.steps import RegistryMove, hand_back, take_over
from kafka_dr.topology import Topology, TopologyError, load_topology

CLUSTERS = """clusters:
  dc1: {bootstrap_servers: "127.0.0.1:1", schema_registry: "http://127.0.0.1:3"}
  dc2: {bootstrap_servers: "127.0.0.1:2"}
"""


def topology(tmp_path: Path, primary: str | None) -> Topology:
    path = tmp_path / "t.yaml"
    path.write_text(CLUSTERS + (f"schema_registry: {{primary: {primary}}}\n" if primary else ""))
    return load_topology(path)


def test_the_plan_needs_a_registry_to_redirect_and_a_known_store(tmp_path: Path) -> None:
    topo = topology(tmp_path, "dc1")
    plan = RedirectPlan.build(topo, "t.yaml", "dc1", "dc2", True)
    assert plan == RedirectPlan("t.yaml", "dc1", "dc2", True)
    data = json.loads(json.dumps(encode(plan)))
    assert data == {"topology": "t.yaml", "registry": "dc1", "store": "dc2", "leader_eligible": True}
    assert decode(RedirectPlan, data) == plan
    with pytest.raises(ValueError, match="param registry_cluster: cluster dc2 has no schema_registry URL"):
        RedirectPlan.build(topo, "t.yaml", "dc2", "dc1", True)
    with pytest.raises(TopologyError, match="dc9"):
        RedirectPlan.build(topo, "t.yaml", "dc1", "dc9", False)
    with pytest.raises(CodecError, match="^RedirectPlan: missing field 'leader_eligible'$"):
        decode(RedirectPlan, {"topology": "t.yaml", "registry": "dc1", "store": "dc1"})


def test_a_failover_takes_over_the_registry_only_from_a_failed_primary_into_a_target_that_has_one(
    tmp_path: Path,
) -> None:
    left = take_over(ClusterAccess(topology(tmp_path, None)), "dc1", "dc2")
    assert encode(left) == {"skipped": "the primary registry is not set, not on dc1"}  # the report's field, all of it
    assert take_over(ClusterAccess(topology(tmp_path, "dc1")), "dc2", "dc1") == RegistryMove(
        skipped="the primary registry is dc1, not on dc2"
    )
    assert take_over(ClusterAccess(topology(tmp_path, "dc1")), "dc1", "dc2") == RegistryMove(
        skipped="cluster dc2 has no schema registry"
    )


def test_a_failback_hands_the_registry_back_only_to_a_restored_primary(tmp_path: Path) -> None:
    assert hand_back(ClusterAccess(topology(tmp_path, "dc1")), "dc2", "dc1") == RegistryMove(
        skipped="the primary registry is dc1, not on dc2"
    )
    assert hand_back(ClusterAccess(topology(tmp_path, None)), "dc1", "dc2") == RegistryMove(
        skipped="the primary registry is not set, not on dc1"
    )
