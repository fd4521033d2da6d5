"""A failover's plan (kafka_dr.failover.plan): what validation refuses with one line, what the mapped steps are
given, and the round trip through the plain JSON it travels as between tasks (XCom, kafka_dr.codec); what its steps
returned, for the report. No Airflow, no Kafka."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_dr.codec import CodecError, decode, encode
from kafka_dr.failover.outcome import FailoverOutcome
from kafka_dr.failover.plan import FailoverPlan
from kafka_dr.failover.report import FailoverRun
from kafka_dr.failover.stop import Stopped
from kafka_dr.schema_redirect.steps import RegistryMove
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
    assert (plan.groups, plan.from_checkpoints) == ("bill.*", True)  # a disaster: the checkpoints kept in the target
    planned = FailoverPlan.build(topo, "t.yaml", "dc1", "dc2", "planned", ".*", "2026-11-21T10:00:00Z")
    assert (planned.from_checkpoints, planned.reset_to_datetime) == (False, "2026-11-21T10:00:00Z")


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


def test_the_plan_comes_back_from_its_xcom_json_with_the_step_timed_added(topo: Topology) -> None:
    plan = FailoverPlan.build(topo, "t.yaml", "dc1", "dc2", "planned", ".*", "2026-11-21T10:00:00Z")
    data = json.loads(json.dumps(encode(plan)))
    assert data["flows"] == ["a", "b"] and "step" not in data and "home" not in data  # None fields left out
    assert decode(FailoverPlan, data) == plan
    step = {"started": "2026-03-01T10:00:00.000+00:00", "ended": "2026-03-01T10:00:01.000+00:00"}
    timed = decode(FailoverPlan, {**data, "step": step})
    assert timed.step == step and decode(FailoverPlan, encode(timed)) == timed
    switch_back = FailoverPlan("d.yaml", "dc2", "dc1", "planned", ".*", ("back",), (), home="dc1")
    assert decode(FailoverPlan, json.loads(json.dumps(encode(switch_back)))) == switch_back


def test_a_plan_json_without_a_field_or_with_one_too_many_is_refused_naming_it() -> None:
    data = {"topology": "t", "failed": "dc1", "target": "dc2", "mode": "planned", "groups": ".*", "flows": ["a"]}
    with pytest.raises(CodecError, match="^FailoverPlan: missing field 'stop_flows'$"):
        decode(FailoverPlan, data)
    with pytest.raises(CodecError, match="^FailoverPlan: unknown field 'flow'$"):
        decode(FailoverPlan, {**data, "stop_flows": [], "flow": "a"})
    with pytest.raises(CodecError, match="^FailoverPlan.flows: expected a list, got str$"):
        decode(FailoverPlan, {**data, "stop_flows": [], "flows": "a"})
    with pytest.raises(CodecError, match="^expected FailoverPlan, got list$"):
        decode(FailoverPlan, [])


def test_the_run_lists_the_steps_that_recorded_their_timing_in_order() -> None:
    step = {"started": "s", "ended": "e"}
    run = FailoverRun(
        verify=FailoverOutcome((), 0, {}, step),
        stop_replication=Stopped({}, step),
        translations=[{"flow": "a", "step": step}],
        schema_registry=RegistryMove(skipped="no primary"),  # recorded no step
    )
    assert list(run.steps()) == ["stop_replication", "verify"]
    assert FailoverRun().steps() == {}
