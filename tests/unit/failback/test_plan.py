"""A failback's plan and switch back (kafka_dr.failback.plan): what validation refuses with one line, the switch
back as a planned failover in reverse, what the mapped steps are given, and the round trip through the plain JSON
they travel as between tasks (XCom, kafka_dr.codec). No Airflow, no Kafka."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kafka_dr.codec import CodecError, decode, encode
from kafka_dr.failback.plan import FailbackPlan, SwitchBack
from kafka_dr.topology import Topology, TopologyError, load_topology

TOPOLOGY = """clusters:
  dc1: {bootstrap_servers: "127.0.0.1:1"}
  dc2: {bootstrap_servers: "127.0.0.1:2"}
  dc3: {bootstrap_servers: "127.0.0.1:3"}
flows:
  - {name: out, source: dc1, target: dc2, topics: {include: ['orders']}}
  - {name: back, source: dc2, target: dc1, topics: {include: ['refunds']}}
"""
STARTED = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)


@pytest.fixture
def topo(tmp_path: Path) -> Topology:
    path = tmp_path / "t.yaml"
    path.write_text(TOPOLOGY)
    return load_topology(path)


def plan(topo: Topology, mode: str = "data_kept") -> FailbackPlan:
    FailbackPlan.check(topo, "dc1", "dc2", mode, "republish")
    return FailbackPlan.build(topo, "t.yaml", "dc1", "id.1", "dc2", mode, "republish", ".*", False)


@pytest.mark.parametrize(
    ("args", "error", "line"),
    [
        (("dc9", "dc2", "data_kept", "report"), TopologyError, "dc9"),
        (("dc1", "dc1", "data_kept", "report"), ValueError, "params restored_cluster and serving_cluster are both"),
        (("dc1", "dc2", "kept", "report"), ValueError, "param mode: must be one of data_kept, data_lost, got 'kept'"),
        (("dc1", "dc2", "data_kept", "drop"), ValueError, "param unreplicated: must be one of report, republish, disc"),
        (("dc1", "dc3", "data_kept", "report"), ValueError, "no flow between dc1 and dc3 either way"),
        (
            (None, "", None, "report"),
            ValueError,
            "^params restored_cluster, serving_cluster, mode: required, no default$",
        ),
    ],
)
def test_a_bad_failback_is_refused_with_one_line(
    topo: Topology, args: tuple[str, str, str, str], error: type[Exception], line: str
) -> None:
    with pytest.raises(error, match=line):
        FailbackPlan.check(topo, *args)


def test_the_plan_knows_the_flows_either_way_and_comes_back_from_its_xcom_json(topo: Topology) -> None:
    made = plan(topo)
    assert (made.flows_out, made.flows_back) == (("out",), ("back",))
    data = json.loads(json.dumps(encode(made)))
    assert decode(FailbackPlan, data) == made and "step" not in data
    timed = decode(FailbackPlan, {**data, "step": {"started": "s", "ended": "e"}})
    assert timed.step == {"started": "s", "ended": "e"} and decode(FailbackPlan, encode(timed)) == timed
    with pytest.raises(CodecError, match="^FailbackPlan: missing field 'restored_cluster_id'$"):
        decode(FailbackPlan, {k: v for k, v in data.items() if k != "restored_cluster_id"})


def test_the_switch_back_is_a_planned_failover_in_reverse_of_the_aliases_at_home_in_the_restored_cluster(
    topo: Topology,
) -> None:
    back = SwitchBack.build(plan(topo), "d.yaml", ["back", "out.failback"], ["out.failback"], STARTED)
    failover = back.failover
    assert (failover.failed, failover.target, failover.home, failover.mode) == ("dc2", "dc1", "dc1", "planned")
    assert (failover.topology, failover.flows, failover.stop_flows) == ("d.yaml", ("back", "out.failback"), ())
    assert back.force is None  # data kept: the cycle rule keeps the restored cluster's own records out
    assert (back.flows, back.force_of("back"), failover.from_checkpoints) == (("back", "out.failback"), None, False)


def test_data_lost_forces_the_restored_clusters_own_records_back_up_to_the_run_start(topo: Topology) -> None:
    back = SwitchBack.build(plan(topo, "data_lost"), "t.yaml", ["back"], [], STARTED)
    assert back.force == {"cluster": r"id\.1", "to": "2026-03-01T10:00:00+00:00"}
    # The resync flows were copied with the override, the flows out without.
    assert (back.force_of("back"), back.force_of("out")) == (back.force, None)


def test_the_switch_back_comes_back_from_its_xcom_json(topo: Topology) -> None:
    back = SwitchBack.build(plan(topo, "data_lost"), "d.yaml", ["back", "out.failback"], ["out.failback"], STARTED)
    data = json.loads(json.dumps(encode(back)))
    assert decode(SwitchBack, data) == back and data["failover"]["home"] == "dc1"
    timed = decode(SwitchBack, {**data, "step": {"started": "s", "ended": "e"}})
    assert timed.step == {"started": "s", "ended": "e"} and decode(SwitchBack, encode(timed)) == timed
    with pytest.raises(CodecError, match="^SwitchBack: missing field 'failover'$"):
        decode(SwitchBack, {"inverse_flows": [], "force": None})
    with pytest.raises(CodecError, match="^SwitchBack.failover: FailoverPlan: missing field 'flows'$"):
        decode(SwitchBack, {**data, "failover": {k: v for k, v in data["failover"].items() if k != "flows"}})
