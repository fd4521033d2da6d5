"""A failback's plan and switch back (kafka_dr.failback.plan): what validation refuses with one line, the switch
back as a planned failover in reverse, the kwargs of the mapped steps, and the round trip through the plain dicts
they travel as between tasks (XCom). No Airflow, no Kafka."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

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


def test_the_plan_knows_the_flows_either_way_and_comes_back_from_its_xcom_dict(topo: Topology) -> None:
    made = plan(topo)
    assert (made.flows_out, made.flows_back) == (("out",), ("back",))
    data = made.to_dict()
    assert json.loads(json.dumps(data)) == data and FailbackPlan.from_dict(data) == made
    timed = FailbackPlan.from_dict({**data, "step": {"started": "s", "ended": "e"}})
    assert timed.step == {"started": "s", "ended": "e"} and FailbackPlan.from_dict(timed.to_dict()) == timed
    assert made.resume_kwargs(topo) == [{"flow": "out", "topology": "t.yaml"}, {"flow": "back", "topology": "t.yaml"}]
    with pytest.raises(ValueError, match="failback plan: missing restored_cluster_id"):
        FailbackPlan.from_dict({k: v for k, v in data.items() if k != "restored_cluster_id"})


def test_the_switch_back_is_a_planned_failover_in_reverse_of_the_aliases_at_home_in_the_restored_cluster(
    topo: Topology,
) -> None:
    back = SwitchBack.build(plan(topo), "d.yaml", ["back", "out.failback"], ["out.failback"], STARTED)
    failover = back.failover
    assert (failover.failed, failover.target, failover.home, failover.mode) == ("dc2", "dc1", "dc1", "planned")
    assert (failover.topology, failover.flows, failover.stop_flows) == ("d.yaml", ("back", "out.failback"), ())
    assert back.force is None  # data kept: the cycle rule keeps the restored cluster's own records out
    assert back.resync_kwargs() == [
        {"flow": "back", "topology": "d.yaml", "force": None},
        {"flow": "out.failback", "topology": "d.yaml", "force": None},
    ]
    assert failover.translations(unseen_from={"back": {"refunds:0": 4}, "out.failback": {}})[0] == {
        "flow": "back",
        "topology": "d.yaml",
        "groups": ".*",
        "from_checkpoints": False,
        "reset_to_datetime": None,
        "unseen_from": {"refunds:0": 4},
    }


def test_data_lost_forces_the_restored_clusters_own_records_back_up_to_the_run_start(topo: Topology) -> None:
    back = SwitchBack.build(plan(topo, "data_lost"), "t.yaml", ["back"], [], STARTED)
    assert back.force == {"cluster": r"id\.1", "to": "2026-03-01T10:00:00+00:00"}
    assert back.resync_kwargs() == [{"flow": "back", "topology": "t.yaml", "force": back.force}]
    ranges = [
        {"flow": "out", "topic": "orders", "partition": 0, "from_offset": 8, "to_offset": 9, "records": 2},
        {"flow": "elsewhere", "topic": "orders", "partition": 1, "from_offset": 1, "to_offset": 1, "records": 1},
    ]
    assert back.verify_kwargs(["out", "back"], ranges, 60.0) == [
        {"flow": "out", "topology": "t.yaml", "skip": ["orders:0:8-9"], "settle": 60.0, "force": None},
        {"flow": "back", "topology": "t.yaml", "skip": [], "settle": 60.0, "force": back.force},
    ]


def test_the_switch_back_comes_back_from_its_xcom_dict(topo: Topology) -> None:
    back = SwitchBack.build(plan(topo, "data_lost"), "d.yaml", ["back", "out.failback"], ["out.failback"], STARTED)
    data = back.to_dict()
    assert json.loads(json.dumps(data)) == data and SwitchBack.from_dict(data) == back
    timed = SwitchBack.from_dict({**data, "step": {"started": "s", "ended": "e"}})
    assert timed.step == {"started": "s", "ended": "e"} and SwitchBack.from_dict(timed.to_dict()) == timed
    with pytest.raises(ValueError, match="switch back: missing failover"):
        SwitchBack.from_dict({"inverse_flows": [], "force": None})
