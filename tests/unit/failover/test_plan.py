"""A failover's plan (kafka_dr.failover.plan): what validation refuses with one line, the kwargs of the mapped
steps, and the round trip through the plain dict it travels as between tasks (XCom). No Airflow, no Kafka."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_dr.failover.plan import FailoverPlan, FailoverRun
from kafka_dr.topology import Topology, TopologyError, load_topology

TOPOLOGY = """clusters:
  dc1: {bootstrap_servers: "127.0.0.1:1"}
  dc2: {bootstrap_servers: "127.0.0.1:2"}
  dc3: {bootstrap_servers: "127.0.0.1:3"}
flows:
  - {name: a, source: dc1, target: dc2, topics: {include: ['orders']}}
  - {name: b, source: dc1, target: dc2, topics: {include: ['payments']}}
  - {name: back, source: dc2, target: dc1, topics: {include: ['refunds']}}
  - {name: other, source: dc3, target: dc2, topics: {include: ['audit']}}
"""


@pytest.fixture
def topo(tmp_path: Path) -> Topology:
    path = tmp_path / "t.yaml"
    path.write_text(TOPOLOGY)
    return load_topology(path)


def test_the_plan_fails_over_the_flows_into_the_target_and_stops_every_flow_of_the_failed_cluster(
    topo: Topology,
) -> None:
    plan = FailoverPlan.build(topo, "t.yaml", "dc1", "dc2", "disaster", "bill.*")
    assert (plan.flows, plan.stop_flows) == (("a", "b"), ("a", "b", "back"))
    assert (plan.reset_to_datetime, plan.home, plan.step) == (None, None, None)
    assert plan.lag_gates() == [{"flow": "a", "topology": "t.yaml"}, {"flow": "b", "topology": "t.yaml"}]
    assert plan.translations()[0] == {
        "flow": "a",
        "topology": "t.yaml",
        "groups": "bill.*",
        "from_checkpoints": True,  # a disaster: the checkpoints kept in the target
        "reset_to_datetime": None,
    }
    planned = FailoverPlan.build(topo, "t.yaml", "dc1", "dc2", "planned", ".*", "2026-11-21T10:00:00Z")
    assert [t["from_checkpoints"] for t in planned.translations()] == [False, False]
    assert planned.translations()[1]["reset_to_datetime"] == "2026-11-21T10:00:00Z"
    unseen = planned.translations(unseen_from={"a": {"orders:0": 7}, "b": {}})
    assert [t["unseen_from"] for t in unseen] == [{"orders:0": 7}, {}]


@pytest.mark.parametrize(
    ("args", "error", "line"),
    [
        (("dc9", "dc2", "planned"), TopologyError, "dc9"),
        (("dc1", "dc1", "planned"), ValueError, "params failed_cluster and target_cluster are both 'dc1'"),
        (("dc1", "dc2", "sudden"), ValueError, "param mode: must be one of planned, disaster, got 'sudden'"),
        (("dc2", "dc3", "planned"), ValueError, "no flow replicates dc2 into dc3: there is nothing to fail over to"),
        (("dc1", "dc2", None), ValueError, "^param mode: required, no default$"),
        ((None, "", "planned"), ValueError, "^params failed_cluster, target_cluster: required, no default$"),
    ],
)
def test_a_bad_failover_is_refused_with_one_line(
    topo: Topology, args: tuple[str, str, str], error: type[Exception], line: str
) -> None:
    with pytest.raises(error, match=line):
        FailoverPlan.build(topo, "t.yaml", *args, ".*")


def test_a_bad_reset_time_is_refused(topo: Topology) -> None:
    with pytest.raises(ValueError, match="yesterday"):
        FailoverPlan.build(topo, "t.yaml", "dc1", "dc2", "disaster", ".*", "yesterday")


def test_the_plan_comes_back_from_its_xcom_dict_with_the_step_timed_added(topo: Topology) -> None:
    plan = FailoverPlan.build(topo, "t.yaml", "dc1", "dc2", "planned", ".*", "2026-11-21T10:00:00Z")
    data = plan.to_dict()
    assert json.loads(json.dumps(data)) == data and "step" not in data
    assert FailoverPlan.from_dict(data) == plan
    step = {"started": "2026-03-01T10:00:00.000+00:00", "ended": "2026-03-01T10:00:01.000+00:00"}
    timed = FailoverPlan.from_dict({**data, "step": step})
    assert timed.step == step and FailoverPlan.from_dict(timed.to_dict()) == timed
    switch_back = FailoverPlan("d.yaml", "dc2", "dc1", "planned", ".*", ("back",), (), home="dc1")
    assert FailoverPlan.from_dict(json.loads(json.dumps(switch_back.to_dict()))) == switch_back


def test_a_plan_dict_without_its_fields_is_refused_naming_them() -> None:
    with pytest.raises(ValueError, match="failover plan: missing flows, stop_flows"):
        FailoverPlan.from_dict({"topology": "t", "failed": "dc1", "target": "dc2", "mode": "planned", "groups": ".*"})
    with pytest.raises(ValueError, match="failover plan: expected a mapping, got list"):
        FailoverPlan.from_dict([])


def test_the_run_lists_the_steps_that_recorded_their_timing_in_order() -> None:
    step = {"started": "s", "ended": "e"}
    run = FailoverRun(
        verify={"groups_checked": 0, "step": step},
        stop_replication={"replicators": {}, "step": step},
        translations=[{"flow": "a", "step": step}],
        schema_registry={"skipped": "no primary"},  # recorded no step
    )
    assert list(run.steps()) == ["stop_replication", "verify"]
    assert FailoverRun().steps() == {}
