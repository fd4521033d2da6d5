"""The DR DAGs' step contracts on the Airflow side (kafka_dr.airflow.common, the phases' task modules), with no
stack: a typed task reads its arguments from their XCom JSON and writes its result back, timed; a bad argument fails
it in one line; the report tasks' inputs are arguments wired in the DAG, so a renamed step or argument fails the
DAG's parse; and the mapped operators' kwargs are built here from the core's domain values."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from airflow.dag_processing.dagbag import DagBag
from airflow.sdk import DAG, task
from airflow.sdk.exceptions import AirflowFailException
from support.steps import failback_plan, failover_plan
from support.topology import write_topology

from kafka_dr.airflow.bringup import _plan
from kafka_dr.airflow.common import flow_kwargs, result_field, typed
from kafka_dr.airflow.failback import gate_kwargs, resume_kwargs, resync_kwargs, verify_kwargs
from kafka_dr.airflow.failover import failover_report, translate_kwargs
from kafka_dr.codec import encode
from kafka_dr.failback.plan import SwitchBack
from kafka_dr.failback.unreplicated import Measured, UnreplicatedRange
from kafka_dr.failover.plan import FailoverPlan
from kafka_dr.failover.switch import Switched

STARTED = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def dagbag() -> DagBag:
    return DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])


@typed
def switch(failover: FailoverPlan, also: list[str] | None = None) -> Switched:
    """A typed step: the plan's flows as the aliases it moved."""
    return Switched((*failover.flows, *(also or [])))


def test_a_typed_task_reads_its_arguments_from_json_and_writes_its_result_back_timed() -> None:
    result = switch(encode(failover_plan()), also=["billing"])
    assert result["moved"] == ["orders-flow", "billing"] and set(result["step"]) == {"started", "ended"}
    assert result["step"]["started"] <= result["step"]["ended"]
    assert switch(encode(failover_plan()))["moved"] == ["orders-flow"]  # an optional argument left out, or None


def test_an_argument_that_does_not_fit_its_type_fails_the_task_in_one_line() -> None:
    data = {k: v for k, v in encode(failover_plan()).items() if k != "flows"}
    with pytest.raises(AirflowFailException, match=r"^switch\(failover\): FailoverPlan: missing field 'flows'$"):
        switch(data)
    with pytest.raises(AirflowFailException, match=r"^switch\(failover\): expected FailoverPlan, got None$"):
        switch(None)  # the upstream step was skipped, and this one needs it


def test_the_report_tasks_take_each_step_they_read_from_the_task_that_made_it(dagbag: DagBag) -> None:
    """No task id as a string: each argument is the XCom of the task the DAG wires to it."""
    wired = {
        dag_id: {name: arg.operator.task_id for name, arg in dagbag.dags[dag_id].task_dict[task_id].op_kwargs.items()}
        for dag_id, task_id in (("dr_failover", "failover_report"), ("dr_failback", "failback_report"))
    }
    assert wired["dr_failover"] == {
        "stopped": "stop_replication",
        "translations": "translate_offsets",
        "registry": "redirect_schema_registry",
        "consumers": "switch_consumers",
        "verified": "verify_failover",
        "approval": "approve",
    }
    assert wired["dr_failback"] == {
        "measured": "measure_unreplicated",
        "approval": "approve",
        "back": "prepare_switch_back",
        "resync_runs": "resync",
        "producers": "switch_producers",
        "catch_up_runs": "resync_catch_up",
        "handled": "handle_unreplicated",
        "registry": "registry_back",
        "consumers": "switch_consumers",
        "verified": "verify_failback",
    }
    bringup = dagbag.dags["dr_bringup"].task_dict["report"]
    assert bringup.op_kwargs["heartbeat_latency_s"].operator.task_id == "heartbeat_round_trip"
    backfill = dagbag.dags["dr_backfill"].task_dict["backfill"]
    assert (backfill.flow.operator.task_id, backfill.flow.key) == ("validate_backfill", "flow")


def test_a_step_wired_by_a_wrong_name_fails_when_the_dag_is_parsed() -> None:
    with DAG("contracts_renamed_argument", schedule=None), pytest.raises(TypeError, match="'stopped'"):
        failover_report(None, None, stoped=None, translations=None, registry=None, consumers=None, verified=None)
    with DAG("contracts_renamed_field", schedule=None):
        with pytest.raises(TypeError, match="returns None: no field 'failover'"):
            result_field(task(multiple_outputs=True)(unannotated)(), "failover")
        back = task(multiple_outputs=True)(prepare)()
        assert result_field(back, "failover").key == "failover"
        with pytest.raises(TypeError, match="returns SwitchBack: no field 'failvoer'"):
            result_field(back, "failvoer")
        with pytest.raises(TypeError, match="pushes no XCom per field"):
            result_field(task(prepare)(), "failover")


@typed
def prepare() -> SwitchBack:
    """A step returning a switch back."""
    return SwitchBack(failover_plan(), (), None)


@typed
def unannotated():  # a result of no known type: it has no field to name
    return prepare()


def test_the_offset_translations_are_built_from_the_plan() -> None:
    disaster = failover_plan(groups="bill.*")
    assert translate_kwargs(disaster) == [
        {
            "flow": "orders-flow",
            "topology": "t.yaml",
            "groups": "bill.*",
            "from_checkpoints": True,  # a disaster: the checkpoints kept in the target
            "reset_to_datetime": None,
        }
    ]
    planned = failover_plan(mode="planned", flows=("a", "b"), reset_to_datetime="2026-11-21T10:00:00Z")
    unseen = translate_kwargs(planned, unseen_from={"a": {"orders:0": 7}, "b": {}})
    assert [(t["from_checkpoints"], t["reset_to_datetime"], t["unseen_from"]) for t in unseen] == [
        (False, "2026-11-21T10:00:00Z", {"orders:0": 7}),
        (False, "2026-11-21T10:00:00Z", {}),
    ]
    assert flow_kwargs("t.yaml", ["a", "b"]) == [
        {"flow": "a", "topology": "t.yaml"},
        {"flow": "b", "topology": "t.yaml"},
    ]


def test_the_failback_mapped_steps_are_built_from_the_switch_back(tmp_path: Path) -> None:
    topology = write_topology(
        tmp_path / "t.yaml",
        {"dc1": "127.0.0.1:1", "dc2": "127.0.0.1:2"},
        flows="  - {name: out, source: dc1, target: dc2, topics: {include: ['orders']}}\n"
        "  - {name: back, source: dc2, target: dc1, topics: {include: ['refunds']}}",
    )
    plan = replace(failback_plan(mode="data_lost"), topology=str(topology))
    back = SwitchBack.build(plan, str(topology), ["back"], [], STARTED)
    assert resync_kwargs.function(encode(back)) == [{"flow": "back", "topology": str(topology), "force": back.force}]
    assert gate_kwargs.function(encode(back)) == [{"flow": "back", "topology": str(topology)}]
    assert [k["flow"] for k in resume_kwargs.function(encode(plan))] == ["out", "back"]  # every flow
    ranges = (UnreplicatedRange("out", "orders", 0, 8, 9, 2), UnreplicatedRange("elsewhere", "orders", 1, 1, 1, 1))
    measured = Measured(records=3, per_topic={"orders": 3}, ranges=ranges)
    assert verify_kwargs.function(encode(back), encode(measured)) == [
        {"flow": "out", "topology": str(topology), "skip": ["orders:0:8-9"], "settle": 60.0, "force": None},
        {"flow": "back", "topology": str(topology), "skip": [], "settle": 60.0, "force": back.force},
    ]


def test_a_bringup_plan_of_nothing_of_odd_entries_or_of_two_topologies_is_refused() -> None:
    assert _plan([{"flow": "a", "topology": "t.yaml"}, {"flow": "b", "topology": "t.yaml"}]).flows == ("a", "b")
    with pytest.raises(ValueError, match="bring-up plan: no flow"):
        _plan([])
    with pytest.raises(ValueError, match="bring-up plan: flows of several topologies: a.yaml, b.yaml"):
        _plan([{"flow": "a", "topology": "a.yaml"}, {"flow": "b", "topology": "b.yaml"}])
    with pytest.raises(ValueError, match="bring-up plan: an entry is not a flow and its topology"):
        _plan([{"flow": "a"}])
